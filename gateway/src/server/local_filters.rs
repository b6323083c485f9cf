//! The filter host behind the local layer's [`LocalFilters`]: a copy the node's own write
//! changed passes the live generation's chain, as a cloud event does.

use crate::filter::Filters;
use crate::local::LocalFilters;
use crate::request::RequestInfo;
use crate::stream::Transform;

impl LocalFilters for Filters {
    fn session(&self, info: &RequestInfo, component: &str) -> Option<Box<dyn Transform>> {
        self.current()
            .session(info, component)
            .map(|session| Box::new(session) as Box<dyn Transform>)
    }
}
