//! The label selector parser against client-go's `labels.Parse` test tables
//! (apimachinery v0.36.3 `selector_test.go`), and fuzzed.

use std::collections::{BTreeMap, BTreeSet};

use kinformer_indexer::{Error, parse_selector};
use kinformer_indexer::{Requirement as Expression, Selector};
use proptest::prelude::*;

fn set(vs: &[&str]) -> BTreeSet<String> {
    vs.iter().map(|v| v.to_string()).collect()
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn sel(exprs: Vec<Expression>) -> Selector {
    exprs.into_iter().collect()
}

#[test]
fn client_go_good_strings_reprint_without_spaces() {
    // TestSelectorParse, minus `x>1` / `x>1,z<5` (see the unsupported-operator test).
    for s in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
    ] {
        let parsed = parse_selector(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        assert_eq!(parsed.to_string(), s.replace(' ', ""), "{s:?}");
    }
}

#[test]
fn client_go_bad_strings_are_errors() {
    for s in [
        "x=a||y=b",
        "x==a==b",
        "!x=a",
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",
        "a notin(",
        "a (",
        "(",
        "x=a b",
        "!",
        "x in",
        "x in (a",
        "=",
        "x=(a)",
        "x!",
    ] {
        match parse_selector(s) {
            Err(Error::InvalidSelector { selector, reason }) => {
                assert_eq!(selector, s);
                assert!(!reason.is_empty());
            }
            other => panic!("{s:?}: {other:?}"),
        }
    }
}

#[test]
fn client_go_set_selector_parser_table() {
    use Expression::*;
    let cases: Vec<(&str, Vec<Expression>)> = vec![
        ("", vec![]),
        ("\rx", vec![Exists("x".into())]),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            vec![Exists("this-is-a-dns.domain.com/key-with-dash".into())],
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            vec![In(
                "this-is-another-dns.domain.com/key-with-dash".into(),
                set(&["so", "what"]),
            )],
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            vec![NotIn(
                "0.1.2.domain/99".into(),
                set(&["10.10.100.1", "tick.tack.clock"]),
            )],
        ),
        ("foo  in\t (abc)", vec![In("foo".into(), set(&["abc"]))]),
        ("x notin\n (abc)", vec![NotIn("x".into(), set(&["abc"]))]),
        (
            "x  notin\t\t\t(abc,def)",
            vec![NotIn("x".into(), set(&["abc", "def"]))],
        ),
        ("x in (abc,def)", vec![In("x".into(), set(&["abc", "def"]))]),
        ("x in (abc,)", vec![In("x".into(), set(&["abc", ""]))]),
        ("x in (abc,abc)", vec![In("x".into(), set(&["abc"]))]),
        ("x in ()", vec![In("x".into(), set(&[""]))]),
        ("x in (a,,)", vec![In("x".into(), set(&["a", ""]))]),
        ("x in (a,,,,,,)", vec![In("x".into(), set(&["a", ""]))]),
        ("x in (a,,a,,a,,a,,)", vec![In("x".into(), set(&["a", ""]))]),
        (
            "x notin (abc,,def),bar,z in (),w",
            vec![
                Exists("bar".into()),
                Exists("w".into()),
                NotIn("x".into(), set(&["abc", "", "def"])),
                In("z".into(), set(&[""])),
            ],
        ),
        (
            "x,y in (a)",
            vec![Exists("x".into()), In("y".into(), set(&["a"]))],
        ),
        ("x=a", vec![Equal("x".into(), "a".into())]),
        ("x==a", vec![Equal("x".into(), "a".into())]),
        (
            "x=a,y!=b",
            vec![
                Equal("x".into(), "a".into()),
                NotEqual("y".into(), "b".into()),
            ],
        ),
        (
            "x=a,y!=b,z in (h,i,j)",
            vec![
                Equal("x".into(), "a".into()),
                NotEqual("y".into(), "b".into()),
                In("z".into(), set(&["h", "i", "j"])),
            ],
        ),
        ("x notin ( )", vec![NotIn("x".into(), set(&[""]))]),
        ("x notin (, a)", vec![NotIn("x".into(), set(&["", "a"]))]),
        ("a ", vec![Exists("a".into())]),
        (
            "a in (x,y,notin, z,in)",
            vec![In("a".into(), set(&["in", "notin", "x", "y", "z"]))],
        ),
        // `in` and `notin` are keys and values too.
        ("notin=in", vec![Equal("notin".into(), "in".into())]),
        ("in", vec![Exists("in".into())]),
        ("!notin", vec![DoesNotExist("notin".into())]),
    ];
    for (s, want) in cases {
        assert_eq!(
            parse_selector(s).unwrap_or_else(|e| panic!("{s:?}: {e}")),
            sel(want),
            "{s:?}"
        );
    }
}

#[test]
fn requirements_are_sorted_by_key_stably() {
    // TestDeterministicParse.
    assert_eq!(
        parse_selector("x=a,a=x").unwrap().to_string(),
        parse_selector("a=x,x=a").unwrap().to_string()
    );
    // Same key: input order kept.
    assert_eq!(parse_selector("b,a!=1,a").unwrap().to_string(), "a!=1,a,b");
}

#[test]
fn client_go_to_string_table() {
    // TestToString (== prints as =: kube-core has one Equal).
    for (s, want) in [
        (
            "x in (abc,def),y notin (jkl),z",
            "x in (abc,def),y notin (jkl),z",
        ),
        ("x notin (abc,def),y!=jkl,!z", "x notin (abc,def),y!=jkl,!z"),
        (
            "x notin (abc),y in (jkl,mno),z notin ()",
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        ("x=abc,y==jkl,z!=a,z", "x=abc,y=jkl,z!=a,z"),
        ("y in (def, abc)", "y in (abc,def)"),
    ] {
        assert_eq!(parse_selector(s).unwrap().to_string(), want);
    }
}

#[test]
fn client_go_matching_table() {
    // TestSelectorMatches, minus the Gt/Lt lines.
    let yes = |s: &str, l: &[(&str, &str)]| {
        assert!(
            parse_selector(s).unwrap().matches(&labels(l)),
            "{s} !~ {l:?}"
        )
    };
    let no = |s: &str, l: &[(&str, &str)]| {
        assert!(
            !parse_selector(s).unwrap().matches(&labels(l)),
            "{s} ~ {l:?}"
        )
    };
    yes("", &[("x", "y")]);
    yes("x=y", &[("x", "y")]);
    yes("x=y,z=w", &[("x", "y"), ("z", "w")]);
    yes("x!=y,z!=w", &[("x", "z"), ("z", "a")]);
    yes("notin=in", &[("notin", "in")]);
    yes("x", &[("x", "z")]);
    yes("!x", &[("y", "z")]);
    no("x=z", &[]);
    no("x=y", &[("x", "z")]);
    no("x=y,z=w", &[("x", "w"), ("z", "w")]);
    no("x!=y,z!=w", &[("x", "z"), ("z", "w")]);
    no("x", &[("y", "z")]);
    no("!x", &[("x", "z")]);
    let set = [("foo", "bar"), ("baz", "blah")];
    yes("foo=bar", &set);
    yes("baz=blah", &set);
    yes("foo=bar,baz=blah", &set);
    no("foo=blah", &set);
    no("baz=bar", &set);
    no("foo=bar,foobar=bar,baz=blah", &set);
}

#[test]
fn key_and_value_validation_follows_client_go() {
    // TestRequirementConstructor's key and value cases, and qualified-name rules.
    let long_key = "a".repeat(254);
    let long_value = format!("x16={}", "a".repeat(254));
    let sixty_four = format!("k={}", "v".repeat(64));
    for bad in [
        long_key.as_str(),
        long_value.as_str(),
        "x17=a b", // two tokens, so a grammar error
        sixty_four.as_str(),
        "-x",
        "x-",
        "x/y/z",
        "/x",
        "x/",
        "Example.com/x",
        "a.b_c-D/x",
        "x=-a",
        "x in (a,-b)",
        "k=ü",
        "kü",
    ] {
        assert!(
            matches!(parse_selector(bad), Err(Error::InvalidSelector { .. })),
            "{bad:?}"
        );
    }
    let ok_value = format!("k={}", "v".repeat(63));
    let ok_name = "n".repeat(63);
    let ok_prefix = format!("{}/n", "p".repeat(253));
    for good in [
        ok_value.as_str(),
        ok_name.as_str(),
        ok_prefix.as_str(),
        "a.b-c/x_Y.z",
        "x=A.b_c-9",
    ] {
        assert!(parse_selector(good).is_ok(), "{good:?}");
    }
}

#[test]
fn greater_and_less_than_are_refused_with_their_own_error() {
    for (s, op) in [
        ("x>1", ">"),
        ("x<7", "<"),
        ("a=b,x>1", ">"),
        ("x>1,z<5", ">"),
        ("x<01", "<"),
        ("n>9223372036854775807", ">"),
    ] {
        match parse_selector(s) {
            Err(Error::UnsupportedSelectorOperator { selector, operator }) => {
                assert_eq!((selector.as_str(), operator), (s, op));
            }
            other => panic!("{s:?}: {other:?}"),
        }
    }
}

#[test]
fn greater_and_less_than_in_a_selector_client_go_refuses_are_invalid() {
    // client-go refuses these too (the value must be an integer and a label value, and
    // an error anywhere refuses the whole selector): the unsupported operator is not
    // what is wrong with them.
    for s in [
        "x<a",
        "x>",
        "x>,y",
        "x>-1",
        "x>+1",
        "x>1.5",
        "n>9223372036854775808",
        "x>1,y=-",
        "y=-,x>1",
        "x>1,",
        "x>>1",
        "-x>1",
    ] {
        match parse_selector(s) {
            Err(Error::InvalidSelector { selector, .. }) => assert_eq!(selector, s),
            other => panic!("{s:?}: {other:?}"),
        }
    }
}

#[test]
fn a_nul_byte_ends_a_token_as_in_client_go() {
    // client-go's lexer reads a NUL as end of input at the start of a token, and as a
    // separator inside one.
    assert_eq!(parse_selector("a\0").unwrap().to_string(), "a");
    assert_eq!(parse_selector("a=b \0 ,c").unwrap().to_string(), "a=b");
    assert_eq!(parse_selector("\0!!garbage").unwrap(), Selector::default());
    assert_eq!(parse_selector("a=\0b").unwrap().to_string(), "a=b");
    assert!(parse_selector("a\0b").is_err());
}

// --- fuzzing ---

fn name_part() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9]",
        "[a-zA-Z0-9][-a-zA-Z0-9_.]{0,20}[a-zA-Z0-9]",
        Just("in".to_owned()),
        Just("notin".to_owned()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    (
        proptest::option::of("[a-z0-9]([-a-z0-9]{0,8}[a-z0-9])?(\\.[a-z0-9]{1,5}){0,2}"),
        name_part(),
    )
        .prop_map(|(prefix, name)| prefix.map_or(name.clone(), |p| format!("{p}/{name}")))
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), name_part()]
}

fn expression() -> impl Strategy<Value = Expression> {
    prop_oneof![
        (key(), value()).prop_map(|(k, v)| Expression::Equal(k, v)),
        (key(), value()).prop_map(|(k, v)| Expression::NotEqual(k, v)),
        (key(), proptest::collection::btree_set(value(), 1..4))
            .prop_map(|(k, v)| Expression::In(k, v)),
        (key(), proptest::collection::btree_set(value(), 1..4))
            .prop_map(|(k, v)| Expression::NotIn(k, v)),
        key().prop_map(Expression::Exists),
        key().prop_map(Expression::DoesNotExist),
    ]
}

/// Selectors as `parse_selector` produces them: sorted by key.
fn selector() -> impl Strategy<Value = Selector> {
    proptest::collection::vec(expression(), 0..5).prop_map(|mut exprs| {
        exprs.sort_by(|a, b| a.key().cmp(b.key()));
        exprs.into_iter().collect()
    })
}

/// Strings close to the grammar, where the bugs would hide.
fn selector_like() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("x"),
            Just("a.b/c"),
            Just("in"),
            Just("notin"),
            Just("="),
            Just("=="),
            Just("!="),
            Just("!"),
            Just("("),
            Just(")"),
            Just(","),
            Just(" "),
            Just("\t"),
            Just(">"),
            Just("<"),
            Just("\0"),
            Just("-"),
            Just("/"),
            Just("é"),
            Just("1"),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parsing_any_string_never_panics(s in any::<String>()) {
        let _ = parse_selector(&s);
    }

    #[test]
    fn parsing_grammar_fragments_never_panics_and_reprints_stably(s in selector_like()) {
        if let Ok(sel) = parse_selector(&s) {
            // What parses prints as something that parses to the same selector.
            let again = parse_selector(&sel.to_string());
            prop_assert_eq!(again.ok(), Some(sel));
        }
    }

    #[test]
    fn valid_selectors_round_trip_through_display(sel in selector()) {
        let printed = sel.to_string();
        let parsed = parse_selector(&printed);
        prop_assert!(parsed.is_ok(), "{:?} did not parse: {:?}", printed, parsed);
        prop_assert_eq!(parsed.ok(), Some(sel));
    }

    #[test]
    fn parsed_selectors_match_like_their_expressions(sel in selector(), l in proptest::collection::btree_map(key(), value(), 0..4)) {
        let parsed = parse_selector(&sel.to_string()).expect("valid");
        prop_assert_eq!(parsed.matches(&l), sel.matches(&l));
    }
}

/// kube-core's selector and this crate's convert into each other requirement for
/// requirement: the same string, the same matches (feature `kube`).
#[cfg(feature = "kube")]
mod kube_conversions {
    use kube_core::SelectorExt as _;
    use proptest::prelude::*;

    use super::{Selector, key, selector, value};

    proptest! {
        #[test]
        fn kube_core_selectors_convert_both_ways_and_match_the_same(
            sel in selector(),
            l in proptest::collection::btree_map(key(), value(), 0..4),
        ) {
            let kube: kube_core::Selector = sel.clone().into();
            prop_assert_eq!(kube.to_string(), sel.to_string());
            prop_assert_eq!(kube.matches(&l), sel.matches(&l));
            prop_assert_eq!(Selector::from(kube), sel);
        }
    }
}
