use fisherkit_pipeline::{run, spec::parse_encoders, Progress, RunConfig};
use std::time::Instant;
struct P(Instant);
impl Progress for P {
    fn start(&self, s: &str, n: u64) {
        eprintln!("[{:7.1}s] start {s} ({n})", self.0.elapsed().as_secs_f64());
    }
    fn inc(&self, _: u64) {}
    fn finish(&self, s: &str) {
        eprintln!("[{:7.1}s]   done: {s}", self.0.elapsed().as_secs_f64());
    }
    fn warn(&self, s: &str) {
        eprintln!("[{:7.1}s] {s}", self.0.elapsed().as_secs_f64());
    }
}
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let mut cfg = RunConfig::new(a[1].clone().into(), a[2].clone().into());
    cfg.encoders = parse_encoders(&a[3]).unwrap();
    cfg.descriptors.scales = a[4].split(',').map(|s| s.parse().unwrap()).collect();
    cfg.pca_dim = a[5].parse().unwrap();
    cfg.gmm_components = a[6].parse().unwrap();
    cfg.mfa_components = a[6].parse().unwrap();
    cfg.mfa_factors = a[7].parse().unwrap();
    cfg.model_sample = a[8].parse().unwrap();
    cfg.cache_dir = Some("/tmp/fk-cache".into());
    let net = fisherkit_cnn::SqueezeNet::builtin().unwrap();
    let r = run(&cfg, &net, &P(Instant::now())).unwrap();
    for row in &r.results {
        println!(
            "{:40} dim {:7} acc {:.2} C {}",
            row.spec,
            row.dim,
            100.0 * row.accuracy,
            row.c
        );
    }
    println!("{:?}", r.timings);
}
