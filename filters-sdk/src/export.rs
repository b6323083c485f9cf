//! `export_filter!`: makes a [`crate::filter::Filter`] the implementation of the component.

/// Exports a type implementing [`crate::filter::Filter`] as the filter of this component.
///
/// In a wasm build it implements the world's exports; natively it expands to nothing, so the
/// same crate builds and tests on the host. Call it once, at the crate root.
#[macro_export]
macro_rules! export_filter {
    ($filter:ty) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            ::std::thread_local! {
                // The configured filter of this instance; a component instance is single-threaded.
                static SLOT: $crate::__private::Slot<$filter> =
                    const { $crate::__private::Slot::new() };
            }

            struct Exports;

            impl $crate::__private::Guest for Exports {
                fn manifest() -> $crate::__private::bindings::Manifest {
                    $crate::__private::manifest::<$filter>()
                }

                fn configure(
                    config: ::std::string::String,
                ) -> ::std::result::Result<(), ::std::string::String> {
                    SLOT.with(|slot| $crate::__private::configure(slot, config))
                }

                fn begin(ctx: $crate::__private::bindings::Context) {
                    SLOT.with(|slot| $crate::__private::begin(slot, ctx))
                }

                fn filter(object: ::std::vec::Vec<u8>) -> $crate::__private::bindings::Decision {
                    SLOT.with(|slot| $crate::__private::filter(slot, object))
                }

                fn filter_batch(
                    objects: ::std::vec::Vec<::std::vec::Vec<u8>>,
                ) -> ::std::vec::Vec<$crate::__private::bindings::Decision> {
                    SLOT.with(|slot| $crate::__private::filter_batch(slot, objects))
                }
            }

    $crate::__private::bindings::export!(Exports with_types_in $crate::__private::bindings);
        };
    };
}
