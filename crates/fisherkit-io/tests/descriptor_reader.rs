//! `DescriptorReader` (issue 29): a descriptor file opened without its
//! descriptors gives, image by image, the bags that were written — for both
//! layouts, float32 and float64, stored and deflated archives, rows of the
//! stacked layout in any order — and a corrupt file gives one error naming
//! the file.

use fisherkit_io::descriptor_file::{
    read_descriptor_file, read_npz_arrays, DescriptorReader, NpyData,
};
use ndarray::Array2;
use proptest::prelude::*;
use std::path::Path;

mod raw;

/// An `.npy` entry (C order) of numpy type `descr` and shape `shape`.
fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
    let shape = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    raw::npy_ordered(descr, false, &shape, data)
}

/// An (n, D) float entry: float32, or float64 with the same (f32-exact) values.
fn floats(x: &Array2<f32>, f64s: bool) -> Vec<u8> {
    let shape = [x.nrows(), x.ncols()];
    if f64s {
        let data: Vec<u8> = x.iter().flat_map(|&v| f64::from(v).to_le_bytes()).collect();
        npy("<f8", &shape, &data)
    } else {
        let data: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        npy("<f4", &shape, &data)
    }
}

fn ints(v: &[i64]) -> Vec<u8> {
    let data: Vec<u8> = v.iter().flat_map(|i| i.to_le_bytes()).collect();
    npy("<i8", &[v.len()], &data)
}

/// How a test file is written.
#[derive(Debug, Clone, Copy)]
struct Layout {
    stacked: bool,
    f64s: bool,
    deflate: bool,
}

/// Writes `bags` with integer labels `0, 1, 2, 0, …` in `layout`; the stacked
/// layout's rows are ordered by `row_order` (a permutation of all rows, in
/// image-major order), so that an image's rows are scattered. Gives the bags
/// a reader must return: each image's rows in file order.
fn write(
    path: &Path,
    bags: &[Array2<f32>],
    layout: Layout,
    row_order: Option<&[usize]>,
) -> Vec<Array2<f32>> {
    let labels: Vec<i64> = (0..bags.len() as i64).map(|i| i % 3).collect();
    let mut entries = Vec::new();
    if layout.stacked {
        let d = bags[0].ncols();
        let mut all: Vec<(i64, Vec<f32>)> = Vec::new();
        for (i, b) in bags.iter().enumerate() {
            for r in b.rows() {
                all.push((i as i64, r.to_vec()));
            }
        }
        let order: Vec<usize> = row_order.map_or_else(|| (0..all.len()).collect(), <[_]>::to_vec);
        let x = Array2::from_shape_fn((all.len(), d), |(r, c)| all[order[r]].1[c]);
        let index: Vec<i64> = order.iter().map(|&r| all[r].0).collect();
        entries.push(("descriptors.npy".to_string(), floats(&x, layout.f64s)));
        entries.push(("image_index.npy".to_string(), ints(&index)));
        entries.push(("labels.npy".to_string(), ints(&labels)));
        raw::zip_of(path, &entries, layout.deflate);
        (0..bags.len())
            .map(|i| {
                let rows: Vec<usize> = (0..index.len()).filter(|&r| index[r] == i as i64).collect();
                x.select(ndarray::Axis(0), &rows)
            })
            .collect()
    } else {
        for (i, b) in bags.iter().enumerate() {
            entries.push((format!("arr_{i}.npy"), floats(b, layout.f64s)));
        }
        entries.push(("labels.npy".to_string(), ints(&labels)));
        raw::zip_of(path, &entries, layout.deflate);
        bags.to_vec()
    }
}

/// The bags of a descriptor file decoded the other way: every array whole
/// (`read_npz_arrays`), the stacked rows grouped by image here.
fn whole(path: &Path) -> Vec<Array2<f32>> {
    let arrays = read_npz_arrays(path).unwrap();
    let get = |name: &str| {
        arrays
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.clone())
    };
    let mat = |a: NpyData| match a {
        NpyData::Float(s, v) => Array2::from_shape_vec((s[0], s[1]), v).unwrap(),
        _ => panic!("not floats"),
    };
    match (get("descriptors"), get("image_index"), get("labels")) {
        (Some(x), Some(NpyData::Int(idx)), Some(NpyData::Int(labels))) => {
            let x = mat(x);
            (0..labels.len())
                .map(|i| {
                    let rows: Vec<usize> = (0..idx.len()).filter(|&r| idx[r] == i as i64).collect();
                    x.select(ndarray::Axis(0), &rows)
                })
                .collect()
        }
        _ => arrays
            .into_iter()
            .filter(|(n, _)| n != "labels")
            .map(|(_, a)| mat(a))
            .collect(),
    }
}

fn bags_of(sizes: &[usize], d: usize, seed: u32) -> Vec<Array2<f32>> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            Array2::from_shape_fn((n, d), |(r, c)| {
                // distinct, f32-exact, of both signs
                ((seed as usize * 7919 + i * 1000 + r * 10 + c) % 2003) as f32 * 0.25 - 250.0
            })
        })
        .collect()
}

/// Checks every way of reading `path` against the written `bags`.
fn check(path: &Path, bags: &[Array2<f32>], layout: Layout) {
    let file = DescriptorReader::open(path).unwrap();
    assert_eq!(file.len(), bags.len());
    assert_eq!(file.dim(), bags[0].ncols());
    // Only the stacked layout in a deflated archive cannot be streamed.
    assert_eq!(
        file.streamed(),
        !(layout.stacked && layout.deflate),
        "{layout:?}"
    );
    let labels: Vec<String> = (0..bags.len()).map(|i| (i % 3).to_string()).collect();
    assert_eq!(file.labels(), &labels[..]);
    // Any order, any image twice.
    for i in (0..bags.len()).rev().chain(0..bags.len()) {
        assert_eq!(file.rows(i), bags[i].nrows());
        assert_eq!(file.bag(i).unwrap(), bags[i], "image {i}, {layout:?}");
    }
    assert_eq!(whole(path), bags, "{layout:?}");
    let set = read_descriptor_file(path).unwrap();
    assert_eq!(set.bags, bags, "{layout:?}");
    assert_eq!(set.labels, labels);
    assert_eq!(set.names, file.names());
}

fn all_layouts() -> Vec<Layout> {
    let mut v = Vec::new();
    for stacked in [false, true] {
        for f64s in [false, true] {
            for deflate in [false, true] {
                v.push(Layout {
                    stacked,
                    f64s,
                    deflate,
                });
            }
        }
    }
    v
}

#[test]
fn streamed_bags_equal_the_written_ones_in_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let bags = bags_of(&[3, 1, 5, 2, 4], 3, 1);
    let n_rows: usize = bags.iter().map(|b| b.nrows()).sum();
    // rows interleaved: reversed, then the odd ones first
    let mut scattered: Vec<usize> = (0..n_rows).rev().collect();
    scattered.sort_by_key(|r| r % 2 == 0);
    for layout in all_layouts() {
        let p = dir.path().join("d.npz");
        let want = write(&p, &bags, layout, None);
        assert_eq!(want, bags);
        check(&p, &want, layout);
        if layout.stacked {
            let want = write(&p, &bags, layout, Some(&scattered));
            assert_ne!(want, bags, "rows reordered");
            check(&p, &want, layout);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn any_bag_sizes_read_back(
        sizes in proptest::collection::vec(1usize..12, 1..9),
        d in 1usize..5,
        seed in 0u32..1000,
        layout in 0usize..8,
        shuffle in any::<bool>(),
    ) {
        let layout = all_layouts()[layout];
        let bags = bags_of(&sizes, d, seed);
        let n_rows: usize = sizes.iter().sum();
        // a seeded permutation of the rows (stacked layout)
        let mut order: Vec<usize> = (0..n_rows).collect();
        if shuffle {
            order.sort_by_key(|&r| (r * 2654435761 + seed as usize) % 1000003);
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.npz");
        let want = write(&p, &bags, layout, Some(&order));
        check(&p, &want, layout);
    }
}

#[test]
fn a_truncated_file_is_one_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let bags = bags_of(&[40, 30, 50], 8, 2);
    for layout in all_layouts() {
        let p = dir.path().join("cut.npz");
        write(&p, &bags, layout, None);
        let bytes = std::fs::read(&p).unwrap();
        for keep in [bytes.len() / 2, bytes.len() - 10] {
            std::fs::write(&p, &bytes[..keep]).unwrap();
            let e = DescriptorReader::open(&p).unwrap_err().to_string();
            assert!(e.contains("cut.npz"), "{e}");
            let e2 = read_descriptor_file(&p).unwrap_err().to_string();
            assert_eq!(e, e2);
        }
    }
}

/// The offset of `needle` in `hay` (the first).
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len())
        .position(|w| w == needle)
        .expect("needle present")
}

#[test]
fn corrupt_data_is_found_when_its_bag_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let bags = bags_of(&[4, 200, 5], 3, 3);
    // A flipped byte inside the second bag of a stored archive: the zip
    // reader's CRC check refuses it, naming the file and the array.
    let p = dir.path().join("flip.npz");
    let layout = Layout {
        stacked: false,
        f64s: false,
        deflate: false,
    };
    write(&p, &bags, layout, None);
    let mut bytes = std::fs::read(&p).unwrap();
    let at = find(&bytes, &bags[1][[2, 1]].to_le_bytes());
    bytes[at] ^= 0x01;
    std::fs::write(&p, &bytes).unwrap();
    let file = DescriptorReader::open(&p).unwrap();
    assert_eq!(file.bag(0).unwrap(), bags[0]);
    let e = file.bag(1).unwrap_err().to_string();
    assert!(e.contains("flip.npz") && e.contains("array `arr_1`"), "{e}");
    assert!(e.to_lowercase().contains("checksum"), "{e}");
    let e = read_descriptor_file(&p).unwrap_err().to_string();
    assert!(e.contains("flip.npz") && e.contains("arr_1"), "{e}");
    // A flipped byte inside a deflated bag: a decompression or CRC error.
    let layout = Layout {
        deflate: true,
        ..layout
    };
    write(&p, &bags, layout, None);
    let (start, len) = {
        let mut z = zip::ZipArchive::new(std::fs::File::open(&p).unwrap()).unwrap();
        let e = z.by_name("arr_1.npy").unwrap();
        (e.data_start() as usize, e.compressed_size() as usize)
    };
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[start + len * 3 / 4] ^= 0x55;
    std::fs::write(&p, &bytes).unwrap();
    let file = DescriptorReader::open(&p).unwrap();
    let e = file.bag(1).unwrap_err().to_string();
    assert!(e.contains("flip.npz") && e.contains("arr_1"), "{e}");
    // A NaN in the stacked layout: found when the image's rows are read.
    let layout = Layout {
        stacked: true,
        f64s: true,
        deflate: false,
    };
    let mut with_nan = bags.clone();
    with_nan[2][[3, 2]] = f32::NAN;
    write(&p, &with_nan, layout, None);
    let file = DescriptorReader::open(&p).unwrap();
    assert_eq!(file.bag(1).unwrap(), bags[1]);
    let e = file.bag(2).unwrap_err().to_string();
    assert!(
        e.contains("flip.npz") && e.contains("image `image 2`: row 3, column 2 is NaN"),
        "{e}"
    );
    // The file cut short after it was opened: the rows cannot be read.
    write(&p, &bags, layout, None);
    let file = DescriptorReader::open(&p).unwrap();
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 3)
        .unwrap();
    let e = file.bag(2).unwrap_err().to_string();
    assert!(
        e.contains("flip.npz") && e.contains("image `image 2`"),
        "{e}"
    );
}
