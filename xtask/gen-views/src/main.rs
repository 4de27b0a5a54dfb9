//! Writes kinformer-compact-store's read views (`crates/compact-store/src/view/generated/`)
//! from kinformer-protobuf's schema table: one view struct per message of every Kubernetes
//! kind the table knows, an accessor per field, named and shaped as k8s-openapi's field.
//!
//! ```text
//! kinformer-gen-views K8S_OPENAPI_SRC OUT_DIR [--check]
//! ```
//!
//! `K8S_OPENAPI_SRC` is k8s-openapi's `src` directory (`cargo xtask gen-proto` finds it with
//! `cargo metadata`): its `v1_NN/` trees give each field's Rust name (from the JSON name
//! its `Deserialize` matches) and whether it is an `Option`, and say in which Kubernetes
//! versions each kind exists, so that a kind's `HasView` impl is compiled only for those.
//! With `--check` nothing is written and the command fails when a file differs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kinformer_protobuf::schema_table::{self, Field, Message, Ty, flags};

/// The Kubernetes versions k8s-openapi's source has a tree for (`v1_33` … `v1_37`); the one
/// the schema table was generated from is [`TABLE_VERSION`].
const TABLE_VERSION: &str = "v1_37";

/// What k8s-openapi says of one struct: JSON name → (Rust name, whether an `Option`).
type RustFields = BTreeMap<String, (String, bool)>;

fn main() {
    if let Err(e) = run() {
        eprintln!("gen-views: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let check = args.iter().any(|a| a == "--check");
    let paths: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let [src, out] = paths[..] else {
        return Err("usage: kinformer-gen-views K8S_OPENAPI_SRC OUT_DIR [--check]".into());
    };
    let src = PathBuf::from(src);
    let versions = versions(&src)?;
    // Names from the table's version first, then from the newest version that has a type.
    let mut rust = read_structs(&src.join(TABLE_VERSION))?;
    let mut presence: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for v in versions.iter().rev() {
        for (key, fields) in read_structs(&src.join(v))? {
            presence.entry(key.clone()).or_default().insert(v.clone());
            rust.entry(key).or_insert(fields);
        }
    }
    let files = generate(&rust, &presence, &versions)?;
    let out = PathBuf::from(out);
    let mut stale = Vec::new();
    for (name, text) in &files {
        let path = out.join(name);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == *text {
            continue;
        }
        if check {
            stale.push(path.display().to_string());
        } else {
            std::fs::create_dir_all(&out).map_err(|e| e.to_string())?;
            std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
        }
    }
    // Files of an older generation that this one no longer writes.
    if let Ok(dir) = std::fs::read_dir(&out) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".rs") && !files.contains_key(&name) {
                if check {
                    stale.push(entry.path().display().to_string());
                } else {
                    std::fs::remove_file(entry.path()).map_err(|e| e.to_string())?;
                }
            }
        }
    }
    if !stale.is_empty() {
        return Err(format!(
            "stale generated views (run `cargo xtask gen-proto`): {}",
            stale.join(", ")
        ));
    }
    Ok(())
}

/// The `v1_NN` trees of k8s-openapi's source, sorted.
fn versions(src: &Path) -> Result<Vec<String>, String> {
    let mut v: Vec<String> = std::fs::read_dir(src)
        .map_err(|e| format!("reading {}: {e}", src.display()))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("v1_"))
        .collect();
    v.sort_by_key(|n| n[3..].parse::<u32>().unwrap_or(0));
    if !v.iter().any(|n| n == TABLE_VERSION) {
        return Err(format!("{} has no {TABLE_VERSION}", src.display()));
    }
    Ok(v)
}

/// Every struct of one version's tree: (module path, name) → its fields.
fn read_structs(tree: &Path) -> Result<BTreeMap<(String, String), RustFields>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("mod.rs") {
                continue;
            }
            let module = path
                .parent()
                .and_then(|p| p.strip_prefix(tree).ok())
                .map(|p| {
                    p.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join("::")
                })
                .unwrap_or_default();
            let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
            if let Some((name, fields)) = parse_struct(&text) {
                out.insert((module, name), fields);
            }
        }
    }
    Ok(out)
}

/// The struct of a k8s-openapi file: its name, and per JSON name its field's Rust name and
/// whether it is an `Option`.
fn parse_struct(text: &str) -> Option<(String, RustFields)> {
    let mut name = None;
    let mut optional: BTreeMap<String, bool> = BTreeMap::new();
    let mut in_struct = false;
    for line in text.lines() {
        let t = line.trim();
        if name.is_none() {
            if let Some(rest) = t.strip_prefix("pub struct ") {
                let n: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                // A tuple struct (`Quantity(pub String)`) has no fields to view.
                if !rest[n.len()..].trim_start().starts_with('{') {
                    return None;
                }
                name = Some(n);
                in_struct = true;
            }
            continue;
        }
        if in_struct {
            if t == "}" {
                in_struct = false;
            } else if let Some(rest) = t.strip_prefix("pub ")
                && let Some((field, ty)) = rest.split_once(": ")
            {
                optional.insert(field.to_owned(), ty.starts_with("Option<"));
            }
            continue;
        }
        // `"nodeName" => Field::Key_node_name,`
        if let Some(rest) = t.strip_prefix('"')
            && let Some((json, rest)) = rest.split_once('"')
            && let Some(rust) = rest.trim().strip_prefix("=> Field::Key_")
        {
            let rust = rust.trim_end_matches(',').to_owned();
            if let Some(&opt) = optional.get(&rust) {
                optional.remove(&rust);
                optional.insert(format!("\0{json}\0{rust}"), opt);
            }
        }
    }
    let fields = optional
        .into_iter()
        .filter_map(|(k, opt)| {
            let rest = k.strip_prefix('\0')?;
            let (json, rust) = rest.split_once('\0')?;
            Some((json.to_owned(), (rust.to_owned(), opt)))
        })
        .collect();
    Some((name?, fields))
}

/// `k8s.io.api.core.v1.PodSpec` → (`api::core::v1`, `PodSpec`).
fn rust_path(message: &Message) -> (String, String) {
    let name = message.name.strip_prefix("k8s.io.").unwrap_or(message.name);
    let (module, ty) = name.rsplit_once('.').unwrap_or(("", name));
    (module.replace('.', "::"), ty.to_owned())
}

/// A field's Rust name where k8s-openapi has none: snake case, a keyword escaped.
fn snake(json: &str) -> String {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if prev_lower || (prev_upper && next_lower && chars.get(i + 1) != Some(&'s')) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else {
            out.push('_');
        }
    }
    match out.as_str() {
        "type" | "continue" | "ref" | "enum" | "const" | "default" | "self" | "struct" => {
            format!("{out}_")
        }
        _ => out,
    }
}

/// The identifier of the static that numbers field `json`.
fn name_static(json: &str) -> String {
    let mut s = String::from("F_");
    for c in json.chars() {
        s.push(if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        });
        if c.is_ascii_uppercase() {
            // `hostPID` and `hostPid` stay apart.
            s.push('_');
        }
    }
    s
}

/// The Rust view type of one value of `ty`.
fn value_type(ty: &Ty) -> String {
    match ty {
        Ty::String => "&'a str".into(),
        Ty::Bytes => "BytesView<'a>".into(),
        Ty::Bool => "bool".into(),
        Ty::Int32 => "i32".into(),
        Ty::Int64 => "i64".into(),
        Ty::Uint32 => "u32".into(),
        Ty::Uint64 => "u64".into(),
        Ty::Double => "f64".into(),
        Ty::Float => "f32".into(),
        Ty::Message(m) => {
            let (module, name) = rust_path(m);
            format!("crate::view::{module}::{name}View<'a>")
        }
        Ty::Map(v) => format!("Map<'a, {}>", value_type(v)),
        Ty::WrappedList(v) => format!("Seq<'a, {}>", value_type(v)),
        Ty::Time => "TimeView<'a>".into(),
        Ty::MicroTime => "MicroTimeView<'a>".into(),
        Ty::Duration => "DurationView<'a>".into(),
        Ty::Quantity => "QuantityView<'a>".into(),
        Ty::IntOrString => "IntOrStr<'a>".into(),
        Ty::RawExtension | Ty::FieldsV1 => "JsonView<'a>".into(),
        _ => "Value<'a>".into(),
    }
}

/// The view type of `field` (a list of its type when repeated).
fn field_type(field: &Field) -> String {
    match &field.ty {
        Ty::Map(_) => value_type(&field.ty),
        ty if field.has(flags::REPEATED) => format!("Seq<'a, {}>", value_type(ty)),
        ty => value_type(ty),
    }
}

/// A message's fields as JSON has them: inlined structs' fields in their parent's place.
fn json_fields(message: &'static Message, out: &mut Vec<&'static Field>) {
    for f in message.fields {
        match (&f.ty, f.has(flags::INLINE)) {
            (Ty::Message(inner), true) => json_fields(inner, out),
            _ => out.push(f),
        }
    }
}

/// Every message reachable from `m`, by name.
fn reach(m: &'static Message, seen: &mut BTreeMap<&'static str, &'static Message>) {
    if seen.insert(m.name, m).is_some() {
        return;
    }
    for f in m.fields {
        let mut ty = &f.ty;
        loop {
            match ty {
                Ty::Map(v) | Ty::WrappedList(v) => ty = v,
                Ty::Message(inner) => {
                    reach(inner, seen);
                    break;
                }
                _ => break,
            }
        }
    }
}

/// Whether a message is a kind's object: it has `metadata` as an `ObjectMeta`.
fn is_object(m: &Message) -> bool {
    m.fields.iter().any(|f| {
        f.json == "metadata"
            && matches!(f.ty, Ty::Message(meta) if meta.name == "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    })
}

const HEADER: &str = "// @generated by `cargo xtask gen-proto` (xtask/gen-views) from kinformer-protobuf's schema table and k8s-openapi's field names.\n// Do not edit: change the generator and run `cargo xtask gen-proto`.\n";

fn generate(
    rust: &BTreeMap<(String, String), RustFields>,
    presence: &BTreeMap<(String, String), BTreeSet<String>>,
    versions: &[String],
) -> Result<BTreeMap<String, String>, String> {
    // The kinds: objects with metadata that k8s-openapi has in some version, one per
    // message (a message registered under several groups is one kind of k8s-openapi).
    let mut kinds: BTreeMap<&'static str, &'static Message> = BTreeMap::new();
    for k in schema_table::kinds() {
        if is_object(k.message) && presence.contains_key(&rust_path(k.message)) {
            kinds.insert(k.message.name, k.message);
        }
    }
    let mut messages = BTreeMap::new();
    for m in kinds.values() {
        reach(m, &mut messages);
    }
    // Per module, its messages.
    let mut modules: BTreeMap<String, Vec<&'static Message>> = BTreeMap::new();
    let mut names: BTreeSet<&'static str> = BTreeSet::new();
    for m in messages.values() {
        modules.entry(rust_path(m).0).or_default().push(m);
        let mut fields = Vec::new();
        json_fields(m, &mut fields);
        names.extend(fields.iter().map(|f| f.json));
    }
    names.insert("apiVersion");
    names.insert("kind");

    let mut files = BTreeMap::new();
    // The field names, numbered once per process each.
    let mut text = String::from(HEADER);
    text.push_str("\nuse crate::view::read::FieldName;\n\n");
    let mut statics = BTreeSet::new();
    for n in &names {
        let s = name_static(n);
        if !statics.insert(s.clone()) {
            return Err(format!("two field names give the static {s}"));
        }
        writeln!(
            text,
            "pub(crate) static {s}: FieldName = FieldName::new({n:?});"
        )
        .ok();
    }
    files.insert("names.rs".to_owned(), text);

    // One file per module.
    for (module, msgs) in &modules {
        let file = format!("{}.rs", module.replace("::", "_"));
        let mut text = String::from(HEADER);
        text.push_str(
            "\n#[allow(unused_imports)]\nuse crate::view::values::{field, BytesView, DurationView, IntOrStr, JsonView, Map, MicroTimeView, Object, QuantityView, Seq, TimeView, Value, ViewValue};\nuse crate::view::read::{Fields, Raw};\nuse crate::view::generated::names::*;\n",
        );
        for m in msgs {
            // A link to k8s-openapi's type only where every version has it: the docs are
            // built with one version, and a type another version lacks is a broken link.
            let linked = presence
                .get(&rust_path(m))
                .is_some_and(|has| has.len() == versions.len());
            write_view(&mut text, m, rust, kinds.contains_key(m.name), linked);
        }
        files.insert(file, text);
    }

    // HasView and the handle's accessors, per kind, in the versions that have it.
    let mut text = String::from(HEADER);
    text.push_str("\n#[allow(unused_imports)]\nuse crate::view::{BytesView, Cached, DurationView, HasView, IntOrStr, JsonView, Map, MicroTimeView, QuantityView, Seq, TimeView, Value};\nuse crate::view::read::Fields;\n");
    for m in kinds.values() {
        let (module, name) = rust_path(m);
        let Some(has) = presence.get(&(module.clone(), name.clone())) else {
            continue;
        };
        let view = format!("crate::view::{module}::{name}View");
        let ty = format!("k8s_openapi::{module}::{name}");
        let mut body = String::new();
        writeln!(
            body,
            "impl HasView for {ty} {{\n    type View<'a> = {view}<'a>;\n    #[inline]\n    fn view(fields: Fields<'_>) -> Self::View<'_> {{\n        {view}(fields)\n    }}\n}}\n"
        )
        .ok();
        writeln!(
            body,
            "/// `{name}`'s top-level accessors on the handle itself.\nimpl Cached<{ty}> {{"
        )
        .ok();
        write_delegates(&mut body, m, rust, &view);
        body.push_str("}\n");
        if has.len() == versions.len() {
            text.push('\n');
            text.push_str(&body);
        } else {
            for v in has {
                let minor = v.trim_start_matches("v1_");
                writeln!(text, "\nk8s_openapi::k8s_if_1_{minor}! {{\n{body}}}").ok();
            }
        }
    }
    files.insert("kinds.rs".to_owned(), text);

    // The module tree.
    let mut text = String::from(HEADER);
    text.push_str("\nmod names;\nmod kinds;\n");
    let mut tree: BTreeMap<String, ()> = BTreeMap::new();
    for module in modules.keys() {
        tree.insert(module.clone(), ());
    }
    write_tree(&mut text, &tree.keys().cloned().collect::<Vec<_>>(), "", 0);
    files.insert("mod.rs".to_owned(), text);
    Ok(files)
}

/// The accessor name of field `json` of `m`.
fn field_method(m: &Message, json: &str, rust: &BTreeMap<(String, String), RustFields>) -> String {
    let (module, name) = rust_path(m);
    let found = rust
        .get(&(module.clone(), name.clone()))
        .and_then(|f| f.get(json));
    match found {
        Some((r, _)) => r.clone(),
        None => {
            if std::env::var_os("GEN_VIEWS_REPORT").is_some() {
                eprintln!("no k8s-openapi name: {module}::{name}.{json}");
            }
            snake(json)
        }
    }
}

/// Whether k8s-openapi has field `json` of `m` as an `Option` (yes where it has no such
/// field: the view cannot promise it).
fn is_optional(m: &Message, json: &str, rust: &BTreeMap<(String, String), RustFields>) -> bool {
    let (module, name) = rust_path(m);
    rust.get(&(module, name))
        .and_then(|f| f.get(json))
        .is_none_or(|(_, opt)| *opt)
}

/// The fields a view of `m` has accessors for, with their names and return types.
fn accessors(
    m: &'static Message,
    rust: &BTreeMap<(String, String), RustFields>,
    is_kind: bool,
) -> Vec<(String, String, String, bool)> {
    let mut out = Vec::new();
    if is_kind {
        for json in ["apiVersion", "kind"] {
            out.push((
                json.to_owned(),
                field_method(m, json, rust),
                "&'a str".to_owned(),
                is_optional(m, json, rust),
            ));
        }
    }
    let mut fields = Vec::new();
    json_fields(m, &mut fields);
    for f in fields {
        out.push((
            f.json.to_owned(),
            field_method(m, f.json, rust),
            field_type(f),
            is_optional(m, f.json, rust),
        ));
    }
    out
}

fn write_view(
    text: &mut String,
    m: &'static Message,
    rust: &BTreeMap<(String, String), RustFields>,
    is_kind: bool,
    linked: bool,
) {
    let (module, name) = rust_path(m);
    let view = format!("{name}View");
    let openapi = if linked {
        format!("[`{name}`](k8s_openapi::{module}::{name})")
    } else {
        format!("`{module}::{name}`, in the Kubernetes versions that have it")
    };
    writeln!(
        text,
        "\n/// A read view of a `{name}` where it lies in the encoding (k8s-openapi's\n/// {openapi}); `{go}` in Go.\n#[derive(Clone, Copy, Default)]\npub struct {view}<'a>(pub(crate) Fields<'a>);\n\nimpl<'a> ViewValue<'a> for {view}<'a> {{\n    fn from_raw(raw: Raw<'a>) -> Option<Self> {{\n        raw.as_struct().map(Self)\n    }}\n}}\n\nimpl std::fmt::Debug for {view}<'_> {{\n    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {{\n        f.debug_tuple(\"{view}\").field(&self.as_object()).finish()\n    }}\n}}\n\nimpl<'a> {view}<'a> {{\n    /// The same fields, read by name.\n    pub fn as_object(&self) -> Object<'a> {{\n        Object::new(self.0)\n    }}",
        go = m.name,
    )
    .ok();
    let fields = accessors(m, rust, is_kind);
    for (json, method, ty, optional) in &fields {
        let n = name_static(json);
        if *optional {
            writeln!(
                text,
                "\n    /// `{json}`.\n    #[inline]\n    pub fn {method}(&self) -> Option<{ty}> {{\n        field(self.0, &{n})\n    }}"
            )
            .ok();
        } else {
            writeln!(
                text,
                "\n    /// `{json}` (empty when absent).\n    #[inline]\n    pub fn {method}(&self) -> {ty} {{\n        field(self.0, &{n}).unwrap_or_default()\n    }}"
            )
            .ok();
        }
    }
    text.push_str("}\n");
    // Serialize: the JSON the accessors read, as k8s-openapi's type would write it.
    writeln!(
        text,
        "\nimpl serde::Serialize for {view}<'_> {{\n    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {{\n        use serde::ser::SerializeMap as _;\n        let {mutable}map = serializer.serialize_map(None)?;",
        mutable = if fields.is_empty() { "" } else { "mut " },
    )
    .ok();
    for (json, method, _, optional) in &fields {
        if *optional {
            writeln!(
                text,
                "        if let Some(v) = self.{method}() {{\n            map.serialize_entry({json:?}, &v)?;\n        }}"
            )
            .ok();
        } else {
            writeln!(
                text,
                "        map.serialize_entry({json:?}, &self.{method}())?;"
            )
            .ok();
        }
    }
    text.push_str("        map.end()\n    }\n}\n");
}

fn write_delegates(
    text: &mut String,
    m: &'static Message,
    rust: &BTreeMap<(String, String), RustFields>,
    view: &str,
) {
    for (_, method, ty, optional) in accessors(m, rust, true) {
        let ty = ty.replace("'a", "'_");
        let ret = if optional {
            format!("Option<{ty}>")
        } else {
            ty
        };
        writeln!(
            text,
            "    /// The view's [`{method}`]({view}::{method}).\n    #[inline]\n    pub fn {method}(&self) -> {ret} {{\n        self.view().{method}()\n    }}"
        )
        .ok();
    }
}

/// `pub mod` blocks for every module path, each including its file.
fn write_tree(text: &mut String, modules: &[String], prefix: &str, depth: usize) {
    let mut children: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in modules {
        let rest = if prefix.is_empty() {
            m.as_str()
        } else {
            match m.strip_prefix(prefix).and_then(|r| r.strip_prefix("::")) {
                Some(r) => r,
                None => continue,
            }
        };
        let head = rest.split("::").next().unwrap_or(rest).to_owned();
        children.entry(head).or_default().push(m.clone());
    }
    let indent = "    ".repeat(depth);
    for (head, ms) in children {
        let path = if prefix.is_empty() {
            head.clone()
        } else {
            format!("{prefix}::{head}")
        };
        writeln!(
            text,
            "\n{indent}/// Views of k8s-openapi's `{path}`.\n{indent}pub mod {head} {{"
        )
        .ok();
        if ms.contains(&path) {
            let file = format!("{}.rs", path.replace("::", "_"));
            writeln!(text, "{indent}    include!(\"{file}\");").ok();
        }
        let deeper: Vec<String> = ms.into_iter().filter(|m| *m != path).collect();
        write_tree(text, &deeper, &path, depth + 1);
        writeln!(text, "{indent}}}").ok();
    }
}
