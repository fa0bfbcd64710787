//! The check itself, on small made-up crates.

use crate::graph::{Graph, Rules};

const FAKE_LAYERS: &[(&str, &[&str])] = &[("low", &["low", "util"]), ("high", &["lib", "high"])];

/// The problems the check finds in a made-up `src/` of `(path, text)` files.
fn problems_in(test: &str, files: &[(&str, &str)], rules: &Rules) -> Vec<String> {
    let root = std::env::temp_dir().join(format!("layers-{test}-{}", std::process::id()));
    let src = root.join("src");
    for (path, text) in files {
        let path = src.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let problems = Graph::read(&src, rules).problems();
    std::fs::remove_dir_all(&root).unwrap();
    problems
}

const FAKE: Rules = Rules {
    layers: FAKE_LAYERS,
    known: &[],
};

#[test]
fn an_edge_up_fails_with_file_and_line_and_comments_and_strings_are_not_edges() {
    let problems = problems_in(
        "up",
        &[
            ("lib.rs", "mod low;\nmod high;\nmod util;\n"),
            (
                "low.rs",
                "//! See [`crate::high::X`].\n// crate::high::Y\nfn f() -> &'static str {\n    \
                 \"crate::high::Z\"\n}\nuse crate::high::{X, Y as Z};\n",
            ),
            ("high.rs", "pub struct X; pub struct Y;\n"),
            ("util.rs", ""),
        ],
        &FAKE,
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("`low -> high` goes up the layers (low -> high)"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/low.rs:6  crate::high::X"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/low.rs:6  crate::high::Y"),
        "{}",
        problems[0]
    );
}

#[test]
fn references_through_super_self_macros_re_exports_and_child_names_are_edges() {
    let files: &[(&str, &str)] = &[
        ("lib.rs", "mod low;\nmod high;\nmod util;\npub use high::Thing;\n"),
        ("high.rs", "pub struct Thing;\npub fn f() {}\n"),
        ("util.rs", ""),
        ("low/mod.rs", "mod inner;\n"),
        (
            "low/inner.rs",
            "#[cfg(test)]\nmod tests {\n    fn t() {\n        super::super::super::high::f();\n    }\n}\n",
        ),
    ];
    let problems = problems_in("super", files, &FAKE);
    assert!(problems[0].contains("src/low/inner.rs:4  super::super::super::high::f"));
    for (name, text, expected) in [
        (
            "self",
            "mod inner;\nuse self::inner::X;\nfn f() { crate::Thing; }\n",
            "src/low/mod.rs:3  crate::Thing",
        ),
        (
            "macro",
            "mod inner;\nmacro_rules! m { () => { $crate::high::f() } }\n",
            "src/low/mod.rs:2  crate::high::f",
        ),
        (
            "glob",
            "mod inner;\nuse super::*;\n",
            "src/low/mod.rs:2  super",
        ),
    ] {
        let mut files = files.to_vec();
        files[3] = ("low/mod.rs", text);
        files[4] = ("low/inner.rs", "pub struct X;\n");
        let problems = problems_in(name, &files, &FAKE);
        assert_eq!(problems.len(), 1, "{name}: {problems:#?}");
        assert!(problems[0].contains(expected), "{name}: {}", problems[0]);
    }
}

#[test]
fn a_cycle_inside_one_layer_fails() {
    let problems = problems_in(
        "cycle",
        &[
            ("lib.rs", "mod low;\nmod high;\nmod util;\n"),
            ("low.rs", "pub fn a() { crate::util::b() }\n"),
            (
                "util.rs",
                "pub fn b() {}\n#[cfg(test)]\nfn t() { super::low::a() }\n",
            ),
            ("high.rs", ""),
        ],
        &FAKE,
    );
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].starts_with("a module cycle among low, util"),
        "{}",
        problems[0]
    );
    assert!(
        problems[0].contains("src/util.rs:3  super::low::a"),
        "{}",
        problems[0]
    );
}

#[test]
fn known_violations_pass_and_only_shrink() {
    let files: &[(&str, &str)] = &[
        ("lib.rs", "mod low;\nmod high;\nmod util;\n"),
        ("low.rs", "use crate::high::X;\n"),
        ("high.rs", "pub struct X;\n"),
        ("util.rs", ""),
    ];
    let known = Rules {
        layers: FAKE_LAYERS,
        known: &[("low", "high")],
    };
    assert_eq!(problems_in("known", files, &known), Vec::<String>::new());
    let stale = Rules {
        layers: FAKE_LAYERS,
        known: &[("low", "high"), ("util", "high")],
    };
    let problems = problems_in("stale", files, &stale);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("`util -> high` is listed in KNOWN_VIOLATIONS but no longer exists")
    );
}

#[test]
fn a_module_in_no_layer_is_named() {
    let problems = problems_in(
        "unknown",
        &[
            ("lib.rs", "mod low;\nmod high;\nmod util;\nmod routing;\n"),
            ("low.rs", ""),
            ("high.rs", ""),
            ("util.rs", ""),
            ("routing/mod.rs", ""),
        ],
        &FAKE,
    );
    assert_eq!(
        problems,
        ["module `routing` (src/routing/mod.rs) is in no layer: add module `routing` to the layer \
          table (tests/layers/main.rs, LAYERS).\n"]
    );
}
