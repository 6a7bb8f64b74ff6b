//! How much two busy cores of this machine slow each other, by kind of work: one program, run
//! alone on one core and then twice at once on two cores by `bench/cores.sh`, prints the seconds
//! its loop took. Arithmetic on registers (`compute`) shows what the cores share of their
//! arithmetic units and clock; streaming over arrays of a given size (`stream MIB`) shows what
//! they share of the caches and memory. Standalone (no dependencies), built by the script with
//! `rustc`; not a test.
//!
//!   cores compute              # fused multiply-adds on 16 independent 16-lane accumulators (AVX-512)
//!   cores stream 8             # b = b/2 + a over two arrays of 8 MiB each, again and again

use std::hint::black_box;
use std::time::Instant;

/// Fused multiply-adds on 16 independent 16-lane accumulators, `rounds` times: enough
/// independent work to keep the vector units busy however long each operation takes. Returns
/// their sum, so that the loop stays.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn compute(rounds: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(1.0); 16];
    let (b, c) = (_mm512_set1_ps(black_box(0.999_999_9)), _mm512_set1_ps(black_box(1e-7)));
    for _ in 0..rounds {
        for lanes in acc.iter_mut() {
            *lanes = _mm512_fmadd_ps(*lanes, b, c);
        }
    }
    acc.iter().map(|&lanes| _mm512_reduce_add_ps(lanes)).sum()
}

/// `b = b/2 + a`, `passes` times: reads two arrays and writes one per pass. Returns one value,
/// so that the loop stays.
fn stream(a: &[f32], b: &mut [f32], passes: usize) -> f32 {
    for _ in 0..passes {
        for (b, a) in b.iter_mut().zip(a) {
            *b = *b * 0.5 + a;
        }
        black_box(&mut *b);
    }
    b[b.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let started;
    let kept = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        #[cfg(target_arch = "x86_64")]
        ["compute"] if std::arch::is_x86_feature_detected!("avx512f") => {
            started = Instant::now();
            // SAFETY: the processor has AVX-512, checked above.
            unsafe { compute(400_000_000) }
        }
        ["stream", mib] => {
            let mib: usize = match mib.parse() {
                Ok(mib) if mib > 0 => mib,
                _ => {
                    eprintln!("stream takes a whole number of MiB, 1 or more, e.g. `stream 8`");
                    std::process::exit(2);
                }
            };
            // About 96 GiB moved whatever the size, so each size runs a second or more.
            let passes = (96 * 1024 / (3 * mib)).max(1);
            // Filled before the clock starts: a page's first touch is the kernel's work.
            let n = mib * 1024 * 1024 / 4;
            let (a, mut b): (Vec<f32>, Vec<f32>) = ((0..n).map(|i| i as f32).collect(), vec![1.0; n]);
            started = Instant::now();
            stream(&a, &mut b, passes)
        }
        _ => {
            eprintln!("usage: cores compute (needs AVX-512) | cores stream MIB");
            std::process::exit(2);
        }
    };
    println!("{:.3}", started.elapsed().as_secs_f64());
    black_box(kept);
}
