//! SVG plots: accuracy against encoding dimension (the paper's Figure 1)
//! and a confusion matrix (`fisherkit evaluate --plot`).

use crate::report::SweepPoint;
use std::fmt::Write;

/// Renders the sweep as a standalone SVG document: one polyline per series,
/// log-scaled dimension on x, mean per-class accuracy (%) on y, each point
/// labelled with its K or R.
pub fn sweep_svg(points: &[SweepPoint], title: &str) -> String {
    let frame = SweepFrame::new(points);
    let mut s = String::new();
    frame.write_axes(&mut s, title);
    frame.write_x_ticks(&mut s);
    frame.write_y_ticks(&mut s);
    frame.write_axis_labels(&mut s);
    for (i, name) in series_names(points).iter().enumerate() {
        frame.write_series(&mut s, i, name, points);
    }
    s.push_str("</svg>\n");
    s
}

/// The series of the sweep, in order of first appearance.
fn series_names(points: &[SweepPoint]) -> Vec<String> {
    let mut series: Vec<String> = Vec::new();
    for p in points {
        if !series.contains(&p.series) {
            series.push(p.series.clone());
        }
    }
    series
}

/// Colours of the series, in turn.
const SERIES_COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// The sweep plot's canvas (`w` × `h`), margins (`l`eft, `r`ight, `t`op,
/// `b`ottom) and data ranges: log10 of the dimension on x, accuracy in %
/// on y.
#[derive(Debug, Clone, Copy)]
struct SweepFrame {
    w: f64,
    h: f64,
    l: f64,
    r: f64,
    t: f64,
    b: f64,
    xmin: f64,
    xmax: f64,
    ymin: f64,
    ymax: f64,
}

/// The x coordinate of a dimension before scaling: its log10 (at least 1).
fn log_dim(d: usize) -> f64 {
    (d.max(1) as f64).log10()
}

impl SweepFrame {
    /// The frame that holds `points`, with a margin around them (a fixed
    /// range when there are none).
    fn new(points: &[SweepPoint]) -> Self {
        let (w, h) = (640.0f64, 420.0f64);
        let (l, r, t, b) = (70.0, 170.0, 40.0, 50.0);
        let (xmin, xmax) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(log_dim(p.dim)), b.max(log_dim(p.dim)))
            });
        let (ymin, ymax) = points
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| {
                (a.min(100.0 * p.accuracy), b.max(100.0 * p.accuracy))
            });
        let (xmin, xmax) = if points.is_empty() {
            (0.0, 1.0)
        } else {
            (xmin - 0.1, xmax + 0.1)
        };
        let (ymin, ymax) = if points.is_empty() {
            (0.0, 100.0)
        } else {
            ((ymin - 2.0).floor(), (ymax + 2.0).ceil())
        };
        SweepFrame {
            w,
            h,
            l,
            r,
            t,
            b,
            xmin,
            xmax,
            ymin,
            ymax,
        }
    }

    /// The x pixel of dimension `d`.
    fn px(&self, d: usize) -> f64 {
        self.l + (log_dim(d) - self.xmin) / (self.xmax - self.xmin) * (self.w - self.l - self.r)
    }

    /// The y pixel of accuracy `a` (a fraction).
    fn py(&self, a: f64) -> f64 {
        self.h
            - self.b
            - (100.0 * a - self.ymin) / (self.ymax - self.ymin) * (self.h - self.t - self.b)
    }

    /// The document's opening tag, white background, title and both axes.
    fn write_axes(&self, s: &mut String, title: &str) {
        let SweepFrame {
            w, h, l, r, t, b, ..
        } = *self;
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
            (w - r + l) / 2.0,
            escape(title)
        );
        let _ = writeln!(
            s,
            r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
            h - b,
            w - r,
            h - b
        );
        let _ = writeln!(
            s,
            r#"<line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"#,
            h - b
        );
    }

    /// A tick and a `1eN` label at every power of ten on the x axis.
    fn write_x_ticks(&self, s: &mut String) {
        let SweepFrame {
            w,
            h,
            l,
            r,
            b,
            xmin,
            xmax,
            ..
        } = *self;
        let mut e = xmin.ceil() as i32;
        while (e as f64) <= xmax {
            let x = l + (e as f64 - xmin) / (xmax - xmin) * (w - l - r);
            let _ = writeln!(
                s,
                r#"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="black"/><text x="{x:.1}" y="{}" text-anchor="middle">1e{e}</text>"#,
                h - b,
                h - b + 5.0,
                h - b + 20.0
            );
            e += 1;
        }
    }

    /// A tick, a grid line and a label at about five accuracies on the y axis.
    fn write_y_ticks(&self, s: &mut String) {
        let SweepFrame {
            w,
            l,
            r,
            ymin,
            ymax,
            ..
        } = *self;
        let step = ((ymax - ymin) / 5.0).max(1.0).round();
        let mut yv = ymin;
        while yv <= ymax + 1e-9 {
            let y = self.py(yv / 100.0);
            let _ = writeln!(
                s,
                r##"<line x1="{}" y1="{y:.1}" x2="{l}" y2="{y:.1}" stroke="black"/><line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{yv:.0}</text>"##,
                l - 5.0,
                w - r,
                l - 8.0,
                y + 4.0
            );
            yv += step;
        }
    }

    /// The names of both axes.
    fn write_axis_labels(&self, s: &mut String) {
        let SweepFrame {
            w, h, l, r, t, b, ..
        } = *self;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">encoding dimension (log scale)</text>"#,
            (w - r + l) / 2.0,
            h - 12.0
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">mean per-class accuracy (%)</text>"#,
            (h - b + t) / 2.0
        );
    }

    /// Series `i`, `name`: its polyline through its points by dimension,
    /// each point labelled with its K or R, and its legend entry.
    fn write_series(&self, s: &mut String, i: usize, name: &str, points: &[SweepPoint]) {
        let SweepFrame { w, r, t, .. } = *self;
        let c = SERIES_COLOURS[i % SERIES_COLOURS.len()];
        let mut pts: Vec<&SweepPoint> = points.iter().filter(|p| p.series == name).collect();
        pts.sort_by_key(|p| p.dim);
        let line: Vec<String> = pts
            .iter()
            .map(|p| format!("{:.1},{:.1}", self.px(p.dim), self.py(p.accuracy)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{c}" stroke-width="2"/>"#,
            line.join(" ")
        );
        for p in &pts {
            let label = match p.factors {
                Some(r) => format!("R={r}"),
                None => format!("K={}", p.components),
            };
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="10">{label}</text>"#,
                self.px(p.dim),
                self.py(p.accuracy),
                self.px(p.dim) + 5.0,
                self.py(p.accuracy) - 6.0
            );
        }
        let ly = t + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            w - r + 10.0,
            w - r + 30.0,
            w - r + 35.0,
            ly + 4.0,
            escape(name)
        );
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Renders a confusion matrix (rows: true class, columns: predicted class)
/// as a standalone SVG heat map: each cell shaded by its share of the row,
/// its count written in it (for up to 40 classes), class names on both axes.
pub fn confusion_svg(classes: &[String], confusion: &[Vec<usize>], title: &str) -> String {
    let n = classes.len().max(1);
    let cell = (600.0 / n as f64).clamp(4.0, 40.0);
    let left = 20.0 + 7.0 * classes.iter().map(|c| c.len()).max().unwrap_or(1).min(30) as f64;
    let top = 50.0 + left;
    let (w, h) = (left + cell * n as f64 + 20.0, top + cell * n as f64 + 20.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        escape(title)
    );
    for (i, name) in classes.iter().enumerate() {
        let c = i as f64 * cell + cell / 2.0;
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"#,
            left - 4.0,
            top + c,
            escape(name)
        );
        let _ = writeln!(
            s,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" dominant-baseline="middle">{}</text>"#,
            left + c,
            top - 4.0,
            escape(name)
        );
    }
    for (i, row) in confusion.iter().enumerate() {
        let total: usize = row.iter().sum();
        for (j, &v) in row.iter().enumerate() {
            let share = if total == 0 {
                0.0
            } else {
                v as f64 / total as f64
            };
            let shade = (255.0 * (1.0 - share)).round() as u8;
            let (x, y) = (left + j as f64 * cell, top + i as f64 * cell);
            let _ = writeln!(
                s,
                r##"<rect x="{x:.1}" y="{y:.1}" width="{cell:.1}" height="{cell:.1}" fill="rgb({shade},{shade},255)" stroke="#ddd"/>"##
            );
            if n <= 40 && v > 0 {
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" dominant-baseline="middle" fill="{}">{v}</text>"#,
                    x + cell / 2.0,
                    y + cell / 2.0,
                    if share > 0.5 { "white" } else { "black" }
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_has_one_polyline_per_series_and_escapes_text() {
        let p = |series: &str, dim, acc, factors| SweepPoint {
            series: series.into(),
            components: 10,
            factors,
            dim,
            accuracy: acc,
        };
        let svg = sweep_svg(
            &[
                p("gmm-fv:var", 1000, 0.8, None),
                p("gmm-fv:var", 5000, 0.85, None),
                p("mfa-fs:loading", 2000, 0.82, Some(1)),
            ],
            "a & b",
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &amp; b") && svg.contains("R=1") && svg.contains("K=10"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn confusion_svg_shades_rows_and_escapes_names() {
        let svg = super::confusion_svg(
            &["a<b".to_string(), "c".to_string()],
            &[vec![3, 1], vec![0, 2]],
            "t & u",
        );
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("a&lt;b") && svg.contains("t &amp; u"), "{svg}");
        // The diagonal cell of the second row holds its whole row: full blue.
        assert!(svg.contains("fill=\"rgb(0,0,255)\""));
        assert_eq!(svg.matches("<rect x=").count(), 4);
    }
}
