//! The bindings generated from `wit/filter.wit`.
#![allow(missing_docs)]

wit_bindgen::generate!({
    path: "wit",
    world: "filter",
    // The export macro is expanded in the filter's crate, which names this crate (and
    // the wit-bindgen runtime) only through the SDK.
    pub_export_macro: true,
    export_macro_name: "export",
    default_bindings_module: "edgegate_filter_sdk::__private::bindings",
    runtime_path: "edgegate_filter_sdk::__private::wit_bindgen::rt",
});
