//! A [`Lease`] as the person desk sees it ([`HeldLease`]).

use std::future::Future;
use std::pin::Pin;

use super::Lease;
use super::person::{HeldLease, Opened};
use crate::error::Result;

impl HeldLease for Lease {
    fn slot(&self) -> usize {
        Lease::slot(self)
    }

    fn strategy(&self) -> &str {
        Lease::strategy(self)
    }

    fn open_for_person<'a>(
        &'a self,
        url: url::Url,
    ) -> Pin<Box<dyn Future<Output = Result<Opened<'a>>> + Send + 'a>> {
        Box::pin(async move {
            let (turn, tab, fetched) = self.hold_browser(url).await?;
            Ok((turn, tab, fetched.outcome))
        })
    }
}
