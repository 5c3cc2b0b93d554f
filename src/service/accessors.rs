//! `get_ref`, `get_mut` and `into_inner` for every service that wraps another,
//! written once.

/// Defines `get_ref`, `get_mut` and `into_inner` on a service that wraps another
/// (as tower-http's middleware do). With no arguments the wrapped service is the
/// field `inner` of type `S`; `inner_service_accessors!(transport: T)` names
/// another field and type.
macro_rules! inner_service_accessors {
    () => {
        $crate::service::inner_service_accessors!(inner: S);
    };
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
