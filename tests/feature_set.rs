//! Every entry point resolves the same dependency features, so a newcomer compiles Burn once:
//! `cargo run --release` (qkv-lab), `cargo run -p qkv-cli` and `cargo test --workspace` build
//! every package they share with the same features. Cargo resolves features per command, over
//! the packages it builds; `crates/qkv-feature-set` lists what the whole workspace turns on where
//! a single entry point would turn on less. This test asks cargo (`cargo tree`, from the lock
//! file, a second or two) what each entry point resolves and, where one differs, prints the line
//! to add to that list.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// A package (`name vX.Y.Z`) and the feature sets it is built with (normal and build
/// dependencies resolve apart, so a package can have two).
type Resolved = BTreeMap<String, BTreeSet<String>>;

fn resolved(selection: &[&str]) -> Resolved {
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--frozen", "-e", "normal,build", "--prefix", "none", "-f", "{p}|{f}"])
        .args(selection)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "cargo tree {selection:?}: {}", String::from_utf8_lossy(&output.stderr));
    let mut packages = Resolved::new();
    for line in String::from_utf8(output.stdout).expect("cargo tree prints UTF-8").lines() {
        let Some((package, features)) = line.split_once('|') else { continue };
        // A package's own path (`(/work/main/crates/…)`) and cargo's "(*)" for one already shown.
        let package = package.split(" (").next().unwrap_or(package).trim().to_string();
        let features = features.trim_end_matches(" (*)").trim().to_string();
        packages.entry(package).or_default().insert(features);
    }
    packages
}

/// What `entry` builds differently from the whole workspace, as lines for qkv-feature-set.
fn differences(entry: &Resolved, workspace: &Resolved) -> Vec<String> {
    let mut lines = Vec::new();
    for (package, features) in entry {
        let Some(everywhere) = workspace.get(package) else { continue };
        if features != everywhere {
            let (name, version) = package.split_once(" v").unwrap_or((package, "?"));
            let major = version.split('.').take(if version.starts_with("0.") { 2 } else { 1 }).collect::<Vec<_>>().join(".");
            let union: BTreeSet<&str> = everywhere.iter().flat_map(|set| set.split(',')).filter(|f| !f.is_empty()).collect();
            let quoted: Vec<String> = union.iter().filter(|f| **f != "default").map(|f| format!("\"{f}\"")).collect();
            let defaults = if union.contains("default") { "" } else { "default-features = false, " };
            lines.push(format!(
                "{name} = {{ version = \"{major}\", {defaults}features = [{}] }}   # here {features:?}, workspace {everywhere:?}",
                quoted.join(", ")
            ));
        }
    }
    lines
}

#[test]
fn every_entry_point_builds_shared_packages_with_the_same_features() {
    let workspace = resolved(&["--workspace"]);
    let mut problems = Vec::new();
    for entry in ["qkv-lab", "qkv-cli"] {
        for line in differences(&resolved(&["-p", entry]), &workspace) {
            problems.push(format!("{entry}: {line}"));
        }
    }
    assert!(
        problems.is_empty(),
        "these packages would compile twice (once for `cargo test --workspace`, once for the entry point named): add \
         each line to crates/qkv-feature-set/Cargo.toml ([build-dependencies] for a build script's or a proc-macro's \
         dependency), then run this test again:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_difference_is_reported_with_the_line_that_fixes_it() {
    let set = |features: &[&str]| features.iter().map(|f| f.to_string()).collect::<BTreeSet<_>>();
    let workspace = Resolved::from([("memchr v2.7.4".to_string(), set(&["alloc,default,std"]))]);
    let entry = Resolved::from([("memchr v2.7.4".to_string(), set(&["alloc"]))]);
    let lines = differences(&entry, &workspace);
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("memchr = { version = \"2\", features = [\"alloc\", \"std\"] }"), "{}", lines[0]);
    assert!(differences(&workspace, &workspace).is_empty());
}
