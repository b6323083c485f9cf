//! The command-line tools that run instead of the gateway: `edgegate filter
//! check|test|bench|compile` for filter authors, `compile` and `check-config` for the gateway's own
//! child processes, `edgegate cache ls|get` for operators.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use crate::cache::{self, RedbStore, SetSummary};
use crate::cli::{
    CacheCommand, FilterCommand, FilterCompileArgs, FilterPushArgs, FilterTestArgs, RunArgs,
};
use crate::filter;

/// Runs `edgegate filter check|test|bench|compile|check-config`: the result on stdout, errors on
/// stderr.
pub fn filter(command: FilterCommand, run: &RunArgs) -> ExitCode {
    let result = match command {
        FilterCommand::Compile(args) => compile(&args, run),
        FilterCommand::Push(args) => return finish(push(&args, run)),
        FilterCommand::CheckConfig => stdin().and_then(|input| filter::check_config(&input)),
        FilterCommand::Check(args) => filter::check(
            &args.wasm,
            args.config.as_deref(),
            args.compiled_cache_dir.as_deref(),
        ),
        FilterCommand::Test(args) => {
            stdin().and_then(|input| filter::test(&test_request(args), &input))
        }
        FilterCommand::Bench(args) => stdin()
            .and_then(|input| filter::bench(&test_request(args.request), &input, args.seconds)),
    };
    finish(result.map_err(|e| crate::error::error_chain(&e)))
}

/// Prints `result`'s text on stdout, or its error on stderr.
fn finish(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(text) => {
            // A closed stdout (`| head`) is the reader's choice, not a failure to report.
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("edgegate filter: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `edgegate filter push`: the component pushed as a filter image; prints its reference
/// pinned by digest.
fn push(args: &FilterPushArgs, run: &RunArgs) -> Result<String, String> {
    use crate::registry::{Reference, Registries, RegistrySettings};
    let image = Reference::parse(&args.image).map_err(|e| e.to_string())?;
    let component =
        std::fs::read(&args.wasm).map_err(|e| format!("{}: {e}", args.wasm.display()))?;
    if !component.starts_with(b"\0asm") {
        return Err(format!("{}: not a WebAssembly file", args.wasm.display()));
    }
    let registries = Registries::new(&RegistrySettings {
        ca_file: run.filter_registry_ca.clone(),
        logins_file: run.filter_registry_config.clone(),
    })
    .map_err(|e| crate::error::error_chain(&e))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let digest = runtime
        .block_on(registries.push(&image, component.into()))
        .map_err(|e| crate::error::error_chain(&e))?;
    Ok(image.at(digest).to_string())
}

/// The request `edgegate filter test` and `bench` simulate, from their arguments.
fn test_request(args: FilterTestArgs) -> filter::TestRequest {
    filter::TestRequest {
        wasm: args.wasm,
        options: args.config,
        component: args.component,
        verb: args.verb,
        group: args.group,
        version: args.version,
        resource: args.resource,
        namespace: args.namespace,
        node_name: args.node_name,
        node_pool: args.node_pool,
        compiled_cache: args.compiled_cache_dir,
    }
}

/// `edgegate filter compile`: reads the component (from stdin for `-`) and compiles it into
/// the compiled-code store.
fn compile(args: &FilterCompileArgs, run: &RunArgs) -> Result<String, filter::FilterError> {
    let (name, wasm) = if args.wasm.as_os_str() == "-" {
        ("stdin".to_owned(), stdin()?)
    } else {
        let wasm = std::fs::read(&args.wasm).map_err(|e| {
            filter::FilterError::Input(format!("cannot read {}: {e}", args.wasm.display()))
        })?;
        (args.wasm.display().to_string(), wasm)
    };
    let dir = args
        .compiled_cache_dir
        .clone()
        .unwrap_or_else(|| run.disk_cache_path.join(filter::COMPILED_CACHE_DIR));
    filter::compile_into_cache(&name, &wasm, &dir)?;
    Ok(format!("compiled {name} into {}", dir.display()))
}

/// All of stdin.
fn stdin() -> Result<Vec<u8>, filter::FilterError> {
    let mut input = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut input)
        .map_err(|e| filter::FilterError::Input(format!("cannot read stdin: {e}")))?;
    Ok(input)
}

/// Runs `edgegate cache ls|get`: asks the running gateway's hub, or, when none answers,
/// reads the cache file (which a running gateway holds exclusively).
pub fn cache(command: CacheCommand, args: &RunArgs) -> ExitCode {
    let hub = format!("http://{}:{}", args.bind_address, args.serve_port);
    let result = match command {
        CacheCommand::Ls => list_sets(&hub, args).map(|sets| table(&sets)),
        CacheCommand::Get(get) => get_object(&hub, args, &get.component, &get.resource, &get.name),
    };
    match result {
        Ok(text) => {
            let _ = writeln!(std::io::stdout(), "{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("edgegate cache: {message}");
            ExitCode::FAILURE
        }
    }
}

fn list_sets(hub: &str, args: &RunArgs) -> Result<Vec<SetSummary>, String> {
    if let Some(body) = ask_hub(&format!("{hub}/v1/cache"))? {
        return serde_json::from_slice(&body)
            .map_err(|e| format!("the hub's answer is not a cache summary: {e}"));
    }
    let store = open_store(args)?;
    cache::summary(&store).map_err(|e| crate::error::error_chain(&e))
}

fn get_object(
    hub: &str,
    args: &RunArgs,
    component: &str,
    resource: &str,
    name: &str,
) -> Result<String, String> {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("component", component)
        .append_pair("resource", resource)
        .append_pair("name", name)
        .finish();
    let object = match ask_hub(&format!("{hub}/v1/cache/object?{query}"))? {
        Some(body) => Some(body),
        None => {
            let store = open_store(args)?;
            cache::object(&store, component, resource, name)
                .map_err(|e| crate::error::error_chain(&e))?
        }
    };
    let object = object.ok_or_else(|| format!("{component} has no cached {resource} {name}"))?;
    pretty(&object)
}

/// A stored object indented for reading, its fields in the order they were stored (the
/// upstream's).
fn pretty(object: &[u8]) -> Result<String, String> {
    crate::json::indent(object).map_err(|e| format!("the cached object is not JSON: {e}"))
}

fn open_store(args: &RunArgs) -> Result<RedbStore, String> {
    RedbStore::open(&args.disk_cache_path).map_err(|e| {
        format!(
            "no gateway answered on its hub, and the cache at {} cannot be opened: {}",
            args.disk_cache_path.display(),
            crate::error::error_chain(&e)
        )
    })
}

/// GETs a hub URL: the body on 200, `None` when no gateway listens, an error otherwise.
fn ask_hub(url: &str) -> Result<Option<bytes::Bytes>, String> {
    use http_body_util::{BodyExt, Empty};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<Empty<bytes::Bytes>>();
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("bad hub address {url}: {e}"))?;
        let response = match tokio::time::timeout(Duration::from_secs(5), client.get(uri)).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) if error.is_connect() => return Ok(None),
            Ok(Err(error)) => return Err(format!("the hub at {url} failed: {error}")),
            Err(_) => return Err(format!("the hub at {url} did not answer in 5 s")),
        };
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        match status.as_u16() {
            200 => Ok(Some(body)),
            404 => Err(status_message(&body)),
            code => Err(format!(
                "the hub answered {code}: {}",
                String::from_utf8_lossy(&body)
            )),
        }
    })
}

/// The `message` of the Kubernetes `Status` the hub answered with, else its body as text.
fn status_message(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct Status {
        message: String,
    }
    serde_json::from_slice::<Status>(body)
        .map(|status| status.message)
        .unwrap_or_else(|_| String::from_utf8_lossy(body).into_owned())
}

/// The sets as an aligned table.
fn table(sets: &[SetSummary]) -> String {
    let now = cache::now();
    let mut rows = vec![
        [
            "COMPONENT",
            "RESOURCE",
            "NAMESPACE",
            "SELECTOR",
            "OBJECTS",
            "RESOURCEVERSION",
            "AGE",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for set in sets {
        let selector = [set.label_selector.as_str(), set.field_selector.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        rows.push(vec![
            set.component.clone(),
            set.resource.clone(),
            if set.namespace.is_empty() {
                "(all)".into()
            } else {
                set.namespace.clone()
            },
            if selector.is_empty() {
                "-".into()
            } else {
                selector
            },
            set.objects.to_string(),
            set.resource_version.clone(),
            humantime::format_duration(Duration::from_secs(now.saturating_sub(set.committed_at)))
                .to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|row| {
            row.iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::{pretty, status_message};

    #[test]
    fn a_cached_object_is_printed_in_its_stored_order() {
        let stored = br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b","namespace":"a"},"data":{"z":"1","a":"\u00e9\n"},"list":[],"n":-1.5}"#;
        let printed = pretty(stored).unwrap();
        let at = |text: &str| {
            printed
                .find(text)
                .unwrap_or_else(|| panic!("{text} in {printed}"))
        };
        assert!(at("\"kind\"") < at("\"apiVersion\"") && at("\"apiVersion\"") < at("\"metadata\""));
        assert!(at("\"name\"") < at("\"namespace\"") && at("\"z\"") < at("\"a\": "));
        assert!(
            printed.contains("\n  \"metadata\": {\n    \"name\": \"b\","),
            "{printed}"
        );
        let again: serde_json::Value = serde_json::from_str(&printed).unwrap();
        let stored: serde_json::Value = serde_json::from_slice(stored).unwrap();
        assert_eq!(again, stored);
    }

    #[test]
    fn a_cached_object_that_is_not_json_is_an_error() {
        for bad in [&b"{\"a\":"[..], b"{\"a\":1} trailing", b"\xff"] {
            let error = pretty(bad).unwrap_err();
            assert!(
                error.starts_with("the cached object is not JSON"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_hub_s_refusal_is_told_by_its_message() {
        let status = br#"{"apiVersion":"v1","code":404,"kind":"Status","message":"kube-proxy has no cached services a/b","reason":"NotFound","status":"Failure"}"#;
        assert_eq!(
            status_message(status),
            "kube-proxy has no cached services a/b"
        );
        assert_eq!(status_message(b"404 page not found"), "404 page not found");
    }
}
