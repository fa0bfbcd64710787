//! The module graph between the units of a layer table, and what breaks the layering.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::read::Reader;

/// The crate root module's name in [`LAYERS`] and in messages.
const ROOT: &str = "lib";

/// A layer table and its known violations.
pub(crate) struct Rules {
    pub(crate) layers: &'static [(&'static str, &'static [&'static str])],
    pub(crate) known: &'static [(&'static str, &'static str)],
}

impl Rules {
    /// The layer index of a unit.
    fn layer_of(&self, unit: &str) -> Option<usize> {
        self.layers
            .iter()
            .position(|(_, modules)| modules.contains(&unit))
    }

    fn layer_name(&self, unit: &str) -> &'static str {
        self.layer_of(unit).map_or("?", |l| self.layers[l].0)
    }
}

/// One reference: where it is, and what it names.
#[derive(Clone, Debug)]
pub(crate) struct Reference {
    pub(crate) file: String,
    pub(crate) line: usize,
    pub(crate) path: String,
}

/// A module path, `["node", "shared"]`; empty for the crate root.
pub(crate) type ModPath = Vec<String>;

/// The modules of the crate and the references between the units of [`LAYERS`].
pub(crate) struct Graph<'r> {
    rules: &'r Rules,
    /// `(from unit, to unit)` → its references.
    edges: BTreeMap<(String, String), Vec<Reference>>,
    /// Problems found while reading (a module in no layer, an unreadable file).
    read_problems: Vec<String>,
}

impl<'r> Graph<'r> {
    pub(crate) fn read(src: &Path, rules: &'r Rules) -> Self {
        let mut reader = Reader {
            src: src.to_path_buf(),
            modules: BTreeMap::new(),
            references: Vec::new(),
            root_exports: BTreeMap::new(),
            problems: Vec::new(),
        };
        reader.read_file(&src.join("lib.rs"), Vec::new(), src.to_path_buf());
        let mut graph = Graph {
            rules,
            edges: BTreeMap::new(),
            read_problems: reader.problems.clone(),
        };
        let units = Units::new(&reader.modules, rules);
        graph.read_problems.extend(units.problems.iter().cloned());
        for (from, target, reference) in &reader.references {
            let target = reader.resolve_root_export(target);
            let (Some(from), Some(to)) = (units.unit_of(from), units.unit_of(&target)) else {
                continue;
            };
            if from != to {
                graph
                    .edges
                    .entry((from.to_string(), to.to_string()))
                    .or_default()
                    .push(reference.clone());
            }
        }
        graph
    }

    /// Every problem, each a paragraph naming the edges and their references.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = self.read_problems.clone();
        if !problems.is_empty() {
            return problems;
        }
        let known: BTreeSet<(String, String)> = (self.rules.known.iter())
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let all_cycles = strongly_connected(self.edges.keys());
        let on_cycle = |edge: &(String, String)| {
            all_cycles
                .iter()
                .any(|scc| scc.contains(&edge.0) && scc.contains(&edge.1))
        };
        for edge in &known {
            if !self.edges.contains_key(edge) {
                problems.push(format!(
                    "`{} -> {}` is listed in KNOWN_VIOLATIONS but no longer exists: remove it \
                     from the list.\n",
                    edge.0, edge.1
                ));
            } else if !self.is_upward(edge) && !on_cycle(edge) {
                problems.push(format!(
                    "`{} -> {}` is listed in KNOWN_VIOLATIONS but is no longer a violation \
                     (it goes down the layers and is on no cycle): remove it from the list.\n",
                    edge.0, edge.1
                ));
            }
        }
        for (edge, references) in &self.edges {
            if self.is_upward(edge) && !known.contains(edge) {
                problems.push(format!(
                    "`{} -> {}` goes up the layers ({} -> {}): a lower layer must not name a \
                     higher one.\n{}",
                    edge.0,
                    edge.1,
                    self.rules.layer_name(&edge.0),
                    self.rules.layer_name(&edge.1),
                    list(references)
                ));
            }
        }
        let rest: Vec<&(String, String)> =
            self.edges.keys().filter(|e| !known.contains(*e)).collect();
        for scc in strongly_connected(rest.iter().copied()) {
            let cycle = shortest_cycle(&scc, &rest);
            let mut text = format!(
                "a module cycle among {} (edges not in KNOWN_VIOLATIONS); one of its cycles:\n",
                scc.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            for edge in cycle {
                let _ = writeln!(text, "  `{} -> {}`", edge.0, edge.1);
                text.push_str(&indent(&list(&self.edges[&edge])));
            }
            problems.push(text);
        }
        problems
    }

    fn is_upward(&self, (from, to): &(String, String)) -> bool {
        matches!(
            (self.rules.layer_of(from), self.rules.layer_of(to)),
            (Some(a), Some(b)) if a < b
        )
    }

    /// The whole graph: modules by layer, every edge with its references, the cycles.
    pub(crate) fn describe(&self) -> String {
        let mut text = String::from("layers, bottom to top:\n");
        for (name, modules) in self.rules.layers {
            let _ = writeln!(text, "  {name}: {}", modules.join(", "));
        }
        text.push_str("\nedges (from -> to, layers, references):\n");
        for (edge, references) in &self.edges {
            let mark = if self.is_upward(edge) { "  UP" } else { "" };
            let _ = writeln!(
                text,
                "{} -> {} ({} -> {}){mark}, {} references",
                edge.0,
                edge.1,
                self.rules.layer_name(&edge.0),
                self.rules.layer_name(&edge.1),
                references.len()
            );
            text.push_str(&list(references));
        }
        text.push_str("\ncycles (all edges):\n");
        for scc in strongly_connected(self.edges.keys()) {
            let _ = writeln!(text, "  {}", scc.into_iter().collect::<Vec<_>>().join(", "));
        }
        text
    }
}

fn list(references: &[Reference]) -> String {
    let mut text = String::new();
    for r in references {
        let _ = writeln!(text, "    {}:{}  {}", r.file, r.line, r.path);
    }
    text
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// The units of [`LAYERS`]: which one a module path belongs to.
struct Units {
    /// Units as module paths, longest first.
    units: Vec<(ModPath, &'static str)>,
    problems: Vec<String>,
}

impl Units {
    fn new(modules: &BTreeMap<ModPath, String>, rules: &Rules) -> Self {
        let mut units: Vec<(ModPath, &'static str)> = Vec::new();
        let mut problems = Vec::new();
        for (_, names) in rules.layers {
            for &name in *names {
                let path: ModPath = if name == ROOT {
                    Vec::new()
                } else {
                    name.split("::").map(str::to_string).collect()
                };
                if !modules.contains_key(&path) {
                    problems.push(format!(
                        "module `{name}` is in the layer table (tests/layers/main.rs, LAYERS) but not \
                         in src/: remove it from the table.\n"
                    ));
                }
                units.push((path, name));
            }
        }
        for (module, file) in modules {
            if let [top] = module.as_slice() {
                if !units.iter().any(|(path, _)| path == module) {
                    problems.push(format!(
                        "module `{top}` ({file}) is in no layer: add module `{top}` to the \
                         layer table (tests/layers/main.rs, LAYERS).\n"
                    ));
                }
            }
        }
        units.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
        Units { units, problems }
    }

    /// The unit a path (a module, or an item in one) belongs to.
    fn unit_of(&self, path: &[String]) -> Option<&'static str> {
        self.units
            .iter()
            .find(|(unit, _)| path.starts_with(unit))
            .map(|(_, name)| *name)
    }
}

/// Strongly connected components with more than one unit (Tarjan's algorithm would do; the
/// graph has a few dozen units, so reachability by repeated search is plenty).
fn strongly_connected<'a>(
    edges: impl Iterator<Item = &'a (String, String)>,
) -> Vec<BTreeSet<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        next.entry(a).or_default().push(b);
        next.entry(b).or_default();
    }
    let reach = |from: &str| -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            for &m in &next[n] {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    };
    let reachable: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|&n| (n, reach(n))).collect();
    let mut sccs: Vec<BTreeSet<String>> = Vec::new();
    for (&n, from_n) in &reachable {
        if !from_n.contains(n) || sccs.iter().any(|s| s.contains(n)) {
            continue;
        }
        let scc: BTreeSet<String> = from_n
            .iter()
            .filter(|m| reachable[*m].contains(n))
            .map(|m| m.to_string())
            .collect();
        sccs.push(scc);
    }
    sccs
}

/// A shortest cycle through the first unit of `scc`, as its edges.
fn shortest_cycle(scc: &BTreeSet<String>, edges: &[&(String, String)]) -> Vec<(String, String)> {
    let start = scc.iter().next().expect("a component has units");
    // Breadth-first from `start` inside the component, until an edge leads back to it.
    let mut came_from: BTreeMap<&String, &String> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for from in frontier {
            for (a, b) in edges.iter().map(|e| (&e.0, &e.1)) {
                if a != from || !scc.contains(b) {
                    continue;
                }
                if b == start {
                    let mut cycle = vec![(a.clone(), b.clone())];
                    let mut at = a;
                    while at != start {
                        let before = came_from[at];
                        cycle.push((before.clone(), at.clone()));
                        at = before;
                    }
                    cycle.reverse();
                    return cycle;
                }
                if !came_from.contains_key(b) {
                    came_from.insert(b, a);
                    next.push(b);
                }
            }
        }
        frontier = next;
    }
    Vec::new()
}
