//! The crate's layering, checked from its source: every `crate::` path names a module on the
//! same layer or one below, and no two files import each other (directly or round a loop).
//!
//! tensor ← parallel ← kernels ← graph ← ops ← autograd (engine) ← optim/safetensors ← python:
//! tensors know nothing of the graph, kernels record nothing, ops record nodes, the engine runs
//! them. ARCHITECTURE.md draws the same picture.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Top-level modules, lowest first; modules on one line share a layer.
const LAYERS: &[&[&str]] = &[
    &["error", "interrupt", "memory"],
    &["tensor"],
    &["parallel"],
    &["kernels"],
    &["graph"],
    &["ops"],
    &["autograd"],
    &["optim", "safetensors", "distributed", "autocast"],
    &["python"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("src is readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src` (`src/ops/nn/conv.rs` → ["ops", "nn", "conv"]).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without comments, string contents and its trailing `#[cfg(test)]` modules
/// (unit tests may drive a module through the layers above it).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let line = line.split(" //").next().unwrap_or(line);
        // Paths inside string literals are prose (messages), not imports.
        let mut in_str = false;
        for c in line.chars() {
            if c == '"' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out
}

/// Every `crate::a::b::...` path in `code`, expanded over one level of `{...}` groups.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    paths_after(code, "crate::")
}

/// Every path of the crate that the code of `module` names, `super::` ones resolved.
fn module_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let mut paths = crate_paths(code);
    let parent = &module[..module.len().saturating_sub(1)];
    paths.extend(paths_after(code, "super::").into_iter().map(|p| {
        let mut full = parent.to_vec();
        full.extend(p);
        full
    }));
    paths
}

/// The paths that follow `prefix` (`crate::` or `super::`) in `code`, one level of `{...}`
/// groups expanded.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().last();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue; // `$crate::`, a longer identifier, or `super::super::`
        }
        let head: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let mut base: Vec<String> = head
            .split("::")
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let after = &rest[head.len()..];
        if after.starts_with('{') && head.ends_with("::") {
            let group = &after[1..after.find('}').unwrap_or(after.len())];
            for item in group.split(',') {
                let item = item.trim().split(" as ").next().unwrap_or("").trim();
                if item.is_empty() || item == "self" {
                    paths.push(base.clone());
                } else {
                    let mut p = base.clone();
                    p.extend(item.split("::").map(str::to_string));
                    paths.push(p);
                }
            }
        } else if !base.is_empty() {
            paths.push(std::mem::take(&mut base));
        }
    }
    paths
}

/// The file a path lands in: the longest prefix that is a module of the crate.
fn resolve(modules: &BTreeSet<Vec<String>>, path: &[String]) -> Option<Vec<String>> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
}

fn find_cycle(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    // Depth-first search with colours; returns the first loop found, as module names.
    fn visit(
        n: &Vec<String>,
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        state: &mut BTreeMap<Vec<String>, u8>,
        stack: &mut Vec<Vec<String>>,
    ) -> Option<Vec<String>> {
        state.insert(n.clone(), 1);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        stack[start..].iter().map(|s| s.join("::")).collect();
                    cycle.push(m.join("::"));
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in edges.keys() {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

struct Crate {
    files: Vec<(Vec<String>, String)>,
    modules: BTreeSet<Vec<String>>,
}

fn read_crate() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(Vec<String>, String)> = paths
        .iter()
        .map(|p| {
            let text = fs::read_to_string(p).expect("a source file is readable");
            (module_of(&src, p), code_of(&text))
        })
        .collect();
    let modules = files.iter().map(|(m, _)| m.clone()).collect();
    Crate { files, modules }
}

#[test]
fn every_module_imports_its_own_layer_or_below() {
    let krate = read_crate();
    let mut upward = Vec::new();
    for (module, code) in &krate.files {
        let Some(own) = module.first().and_then(|m| layer_of(m)) else {
            continue; // lib.rs: the crate root declares every layer
        };
        for path in crate_paths(code) {
            let Some(target) = path.first() else { continue };
            let Some(theirs) = layer_of(target) else {
                continue; // a crate-root re-export such as crate::Tensor
            };
            if theirs > own {
                upward.push(format!(
                    "{} -> crate::{}",
                    module.join("::"),
                    path.join("::")
                ));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports that point up the layers ({}):\n{}",
        LAYERS
            .iter()
            .map(|l| l.join("/"))
            .collect::<Vec<_>>()
            .join(" < "),
        upward.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let krate = read_crate();
    let unplaced: BTreeSet<&String> = krate
        .modules
        .iter()
        .filter_map(|m| m.first())
        .filter(|m| layer_of(m).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS in tests/structure.rs: {unplaced:?}"
    );
}

#[test]
fn no_two_files_import_each_other() {
    let krate = read_crate();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, code) in &krate.files {
        for path in module_paths(module, code) {
            let Some(target) = resolve(&krate.modules, &path) else {
                continue;
            };
            // A module reaching into its own children (mod.rs re-exports) is not a loop.
            if target != *module && !target.starts_with(module) {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        panic!("files that import each other: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_path_reader_sees_groups_strings_and_comments() {
    let code = code_of(
        "use crate::a::{b, c::d as e};\n// crate::comment\nlet s = \"crate::in_string\";\nx(crate::f::g);\n#[cfg(test)]\nmod tests { use crate::late; }\n",
    );
    let paths = crate_paths(&code);
    let names: Vec<String> = paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(names, vec!["a::b", "a::c::d", "f::g"]);
}
