//! How the configuration's lists and named values read from JSON: a list is
//! a JSON array or the command line's comma-separated text (`"96,128"`,
//! `"gmm-fv:var,mfa-fs:loading"`), a single number is a list of one; names
//! (patch mode, store format, classifier, whitening, encoder specs) are the
//! command line's words.

use crate::spec::{parse_encoders, EncoderSpec};
use crate::store::StoreFormat;
use fisherkit_cnn::descriptors::PatchMode;
use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

/// A list of `T`: a JSON array, comma-separated text, or one value.
pub(crate) fn list<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr + Deserialize<'de>,
{
    struct ListVisitor<T>(PhantomData<T>);

    impl<T> ListVisitor<T>
    where
        T: FromStr,
    {
        fn parse<E: de::Error>(text: &str, whole: &str) -> Result<T, E> {
            text.trim().parse().map_err(|_| {
                E::custom(format!(
                    "`{}` is not a valid value in `{whole}`",
                    text.trim()
                ))
            })
        }
    }

    impl<'de, T: FromStr + Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list (an array, or comma-separated text such as \"1,2\")")
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut out = Vec::new();
            while let Some(v) = seq.next_element()? {
                out.push(v);
            }
            Ok(out)
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<Vec<T>, E> {
            if s.trim().is_empty() {
                return Ok(Vec::new());
            }
            s.split(',').map(|t| Self::parse(t, s)).collect()
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Vec<T>, E> {
            Ok(vec![Self::parse(&v.to_string(), &v.to_string())?])
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Vec<T>, E> {
            Ok(vec![Self::parse(&v.to_string(), &v.to_string())?])
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Vec<T>, E> {
            Ok(vec![Self::parse(&v.to_string(), &v.to_string())?])
        }
    }

    d.deserialize_any(ListVisitor(PhantomData))
}

/// Three per-channel numbers (`--onnx-mean`): an array or `"a,b,c"`.
pub(crate) fn three<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[f32; 3]>, D::Error> {
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Three(#[serde(deserialize_with = "list")] Vec<f32>);

    match Option::<Three>::deserialize(d)? {
        None => Ok(None),
        Some(Three(v)) if v.len() == 3 && v.iter().all(|x| x.is_finite()) => {
            Ok(Some([v[0], v[1], v[2]]))
        }
        Some(Three(v)) => Err(de::Error::custom(format!(
            "expected three finite numbers, one per channel, got {v:?}"
        ))),
    }
}

/// Encoder specs: an array of specs, or the comma-separated `--encoders` text.
pub(crate) mod encoders {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(v: &[EncoderSpec], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(EncoderSpec::name))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Vec<EncoderSpec>, D::Error> {
        let texts: Vec<String> = super::list(d)?;
        let mut out = Vec::new();
        for t in texts {
            out.extend(parse_encoders(&t).map_err(de::Error::custom)?);
        }
        Ok(out)
    }
}

/// One encoder spec or none (`--model-encoder`).
pub(crate) mod encoder {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        v: &Option<EncoderSpec>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        v.as_ref().map(EncoderSpec::name).serialize(s)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<EncoderSpec>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        let mut specs = parse_encoders(&text).map_err(de::Error::custom)?;
        if specs.len() != 1 {
            return Err(de::Error::custom(format!(
                "`{text}`: one encoder, not a list"
            )));
        }
        Ok(specs.pop())
    }
}

/// A closed set of words read and written as text.
macro_rules! words {
    ($module:ident, $ty:ty, $what:literal, [$($variant:expr => $word:literal),+ $(,)?]) => {
        pub(crate) mod $module {
            use super::*;

            pub(crate) fn serialize<S: Serializer>(v: &$ty, s: S) -> Result<S::Ok, S::Error> {
                let word = match *v {
                    $(x if x == $variant => $word,)+
                    _ => unreachable!("every variant has a word"),
                };
                s.serialize_str(word)
            }

            pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$ty, D::Error> {
                let text = String::deserialize(d)?;
                match text.to_ascii_lowercase().as_str() {
                    $($word => Ok($variant),)+
                    _ => Err(de::Error::custom(format!(
                        concat!("unknown ", $what, " `{}` (expected {})"),
                        text,
                        [$($word),+].join(", ")
                    ))),
                }
            }
        }
    };
}

words!(patch_mode, PatchMode, "patch mode", [PatchMode::Dense => "dense", PatchMode::Exact => "exact"]);
words!(store_format, StoreFormat, "store format", [StoreFormat::F32 => "f32", StoreFormat::Q8 => "q8"]);
