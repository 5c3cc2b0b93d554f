//! `get_ref`, `get_mut` and `into_inner` for every service that wraps another,
//! written once.

/// Defines `get_ref`, `get_mut` and `into_inner` on a service that wraps another
/// (as tower-http's middleware do): `inner_service_accessors!(inner: S)` for the
/// wrapped service in the field `inner`, of type `S`.
macro_rules! inner_service_accessors {
    ($field:ident : $inner:ty) => {
        /// The wrapped service.
        pub fn get_ref(&self) -> &$inner {
            &self.$field
        }

        /// The wrapped service, mutably.
        pub fn get_mut(&mut self) -> &mut $inner {
            &mut self.$field
        }

        /// Unwraps the wrapped service.
        pub fn into_inner(self) -> $inner {
            self.$field
        }
    };
}

pub(crate) use inner_service_accessors;
