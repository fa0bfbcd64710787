//! Reading the crate: its modules, from `lib.rs` down as rustc finds them, and every path
//! that names another module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};

use crate::graph::{ModPath, Reference};

/// Walks the module tree from `lib.rs` and collects the references.
pub(crate) struct Reader {
    pub(crate) src: PathBuf,
    pub(crate) modules: BTreeMap<ModPath, String>,
    /// `(from module, absolute target path, where)`.
    pub(crate) references: Vec<(ModPath, ModPath, Reference)>,
    /// Names the crate root imports or re-exports (`pub use node::Node`) → their path.
    pub(crate) root_exports: BTreeMap<String, ModPath>,
    pub(crate) problems: Vec<String>,
}

/// Where the tokens being read are: their module, its child modules, its directory.
struct Scope<'a> {
    module: ModPath,
    children: BTreeSet<String>,
    /// The directory of the module's out-of-line children.
    dir: PathBuf,
    file: &'a str,
}

impl Reader {
    pub(crate) fn read_file(&mut self, file: &Path, module: ModPath, dir: PathBuf) {
        let name = file
            .strip_prefix(self.src.parent().unwrap_or(&self.src))
            .unwrap_or(file)
            .display()
            .to_string();
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                self.problems.push(format!("cannot read {name}: {e}\n"));
                return;
            }
        };
        let tokens: TokenStream = match text.parse() {
            Ok(tokens) => tokens,
            Err(e) => {
                self.problems.push(format!("cannot tokenize {name}: {e}\n"));
                return;
            }
        };
        self.modules.insert(module.clone(), name.clone());
        self.read_tokens(tokens, module, dir, &name);
    }

    fn read_tokens(&mut self, tokens: TokenStream, module: ModPath, dir: PathBuf, file: &str) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let scope = Scope {
            children: child_modules(&tokens),
            module,
            dir,
            file,
        };
        let mut i = 0;
        while i < tokens.len() {
            i = self.read_at(&tokens, i, &scope);
        }
    }

    /// Reads the item or token at `i`; returns the index after what it consumed.
    fn read_at(&mut self, tokens: &[TokenTree], i: usize, scope: &Scope) -> usize {
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "mod" => {
                let Some(TokenTree::Ident(name)) = tokens.get(i + 1) else {
                    return i + 1;
                };
                let name = name.to_string();
                let mut module = scope.module.clone();
                module.push(name.clone());
                if has_path_attribute(&tokens[..i]) {
                    self.problems.push(format!(
                        "{}: `#[path]` on `mod {name}`: tests/layers/main.rs does not follow it; \
                         teach it or move the file.\n",
                        scope.file
                    ));
                }
                match tokens.get(i + 2) {
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                        self.modules.insert(module.clone(), scope.file.to_string());
                        self.read_tokens(g.stream(), module, scope.dir.join(&name), scope.file);
                        i + 3
                    }
                    _ => {
                        let flat = scope.dir.join(format!("{name}.rs"));
                        let (file, dir) = if flat.exists() {
                            (flat, scope.dir.join(&name))
                        } else {
                            let nested = scope.dir.join(&name);
                            (nested.join("mod.rs"), nested)
                        };
                        self.read_file(&file, module, dir);
                        i + 2
                    }
                }
            }
            TokenTree::Ident(ident) if ident == "use" => {
                let end = (i..tokens.len())
                    .find(|&j| matches!(&tokens[j], TokenTree::Punct(p) if p.as_char() == ';'))
                    .unwrap_or(tokens.len());
                let mut leaves = Vec::new();
                use_tree(&tokens[i + 1..end], Vec::new(), &mut leaves);
                for (path, alias, line) in leaves {
                    if let Some(target) = resolve(&path, scope) {
                        if scope.module.is_empty() && !alias.is_empty() && alias != "*" {
                            self.root_exports.insert(alias, target.clone());
                        }
                        self.reference(scope, target, path.join("::"), line);
                    }
                }
                end + 1
            }
            TokenTree::Ident(ident) => {
                let name = ident.to_string();
                let starts_path = matches!(name.as_str(), "crate" | "super" | "self")
                    || scope.children.contains(&name);
                // `x.shared::<T>()` is a method and `a::shared::b` a path of another start.
                let after_dot =
                    i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
                let mid_path = i > 1 && is_path_sep(tokens, i - 2);
                if !starts_path || after_dot || mid_path || !is_path_sep(tokens, i + 1) {
                    return i + 1;
                }
                let mut path = vec![name];
                let mut j = i + 1;
                while is_path_sep(tokens, j) {
                    match tokens.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            j += 3;
                        }
                        _ => break,
                    }
                }
                if path.len() > 1 {
                    if let Some(target) = resolve(&path, scope) {
                        let line = ident.span().start().line;
                        self.reference(scope, target, path.join("::"), line);
                    }
                }
                j
            }
            TokenTree::Group(g) => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                let mut k = 0;
                while k < inner.len() {
                    k = self.read_at(&inner, k, scope);
                }
                i + 1
            }
            _ => i + 1,
        }
    }

    fn reference(&mut self, scope: &Scope, target: ModPath, path: String, line: usize) {
        self.references.push((
            scope.module.clone(),
            target,
            Reference {
                file: scope.file.to_string(),
                line,
                path,
            },
        ));
    }

    /// `crate::Node` is `crate::node::Node`: follows the crate root's imports and re-exports.
    pub(crate) fn resolve_root_export(&self, target: &[String]) -> ModPath {
        match target.first() {
            Some(first) if !self.modules.contains_key(&vec![first.clone()]) => {
                match self.root_exports.get(first) {
                    Some(path) if path.first() != Some(first) => {
                        let mut resolved = path.clone();
                        resolved.extend(target[1..].iter().cloned());
                        resolved
                    }
                    _ => target.to_vec(),
                }
            }
            _ => target.to_vec(),
        }
    }
}

/// `::` at `i`.
fn is_path_sep(tokens: &[TokenTree], i: usize) -> bool {
    matches!(
        (tokens.get(i), tokens.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// The names of the modules declared (`mod x;` or `mod x { … }`) at this level.
fn child_modules(tokens: &[TokenTree]) -> BTreeSet<String> {
    tokens
        .windows(2)
        .filter_map(|w| match w {
            [TokenTree::Ident(m), TokenTree::Ident(name)] if m == "mod" => Some(name.to_string()),
            _ => None,
        })
        .collect()
}

/// Whether the attributes just before `mod` (back to the previous item) include `#[path …]`.
fn has_path_attribute(before: &[TokenTree]) -> bool {
    before
        .iter()
        .rev()
        .take_while(|t| !matches!(t, TokenTree::Punct(p) if p.as_char() == ';') && !matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Brace))
        .any(|t| matches!(t, TokenTree::Group(g) if g.delimiter() == Delimiter::Bracket && g.stream().into_iter().next().is_some_and(|f| f.to_string() == "path")))
}

/// The leaves of a use tree: `(path, name it binds, line)`; a glob's name is `*`.
fn use_tree(
    tokens: &[TokenTree],
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, String, usize)>,
) {
    let mut path = prefix;
    let mut line = 0;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Ident(ident) if ident == "as" => {
                if let Some(alias) = tokens.get(i + 1) {
                    out.push((path.clone(), alias.to_string(), line));
                }
                return;
            }
            TokenTree::Ident(ident) if ident == "self" && !path.is_empty() => {
                line = ident.span().start().line;
            }
            TokenTree::Ident(ident) => {
                line = ident.span().start().line;
                path.push(ident.to_string());
            }
            TokenTree::Punct(p) if p.as_char() == '*' => {
                out.push((path.clone(), "*".to_string(), p.span().start().line));
                return;
            }
            TokenTree::Punct(p) if p.as_char() == ':' && i == 0 && path.is_empty() => {
                // A leading `::`: an external crate.
                return;
            }
            TokenTree::Group(g) if g.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                for part in inner.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ','))
                {
                    if !part.is_empty() {
                        use_tree(part, path.clone(), out);
                    }
                }
                return;
            }
            _ => {}
        }
        i += 1;
    }
    if let Some(last) = path.last() {
        out.push((path.clone(), last.clone(), line));
    }
}

/// The absolute path a path written in `scope` names, if it is in this crate.
fn resolve(path: &[String], scope: &Scope) -> Option<ModPath> {
    let first = path.first()?;
    let (mut base, rest) = match first.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (scope.module.clone(), &path[1..]),
        "super" => {
            let mut base = scope.module.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
            (base, rest)
        }
        name if scope.children.contains(name) => (scope.module.clone(), path),
        _ => return None,
    };
    base.extend(rest.iter().cloned());
    Some(base)
}
