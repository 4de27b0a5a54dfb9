//! The list: client-go's paged list into the sink, the page size it picks and the fallback
//! when a `continue` token expires.

use kinformer_core::{ErrorChain, Listed, MetaObject, ObjectKey, Sink};
use tracing::Instrument;

use super::Reflector;
use super::run_state::RunState;
use crate::{Error, ListOptions, ListerWatcher, Undecodable};

/// client-go's page size for lists.
pub const DEFAULT_PAGE_SIZE: u32 = 500;

impl<K, L, S> Reflector<K, L, S>
where
    K: MetaObject + Send + Sync + 'static,
    L: ListerWatcher<K>,
    S: Sink<K>,
{
    /// Picks the page size as client-go's reflector does.
    pub(super) fn page_size_for(&self, rv: &str, paginated_before: bool) -> Option<u32> {
        match self.page_size {
            Some(0) => None,
            Some(n) => Some(n),
            None if paginated_before => Some(DEFAULT_PAGE_SIZE),
            // A relist at a known RV, unpaged, can be served by the watch cache.
            None if !rv.is_empty() && rv != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        }
    }

    /// A full list into the sink, at the RV [`RunState::relist_rv`] picks; an RV the
    /// server no longer (or not yet) has is retried at `""`.
    pub(super) async fn list(&self, st: &mut RunState) -> Result<(), Error> {
        let rv = st.relist_rv().to_owned();
        let page_size = self.page_size_for(&rv, st.paginated_result);
        let span = tracing::info_span!(
            "list",
            reason = %st.reason,
            resource_version = %rv,
            page_size = page_size.unwrap_or(0),
            pages = tracing::field::Empty,
            items = tracing::field::Empty,
        );
        async {
            tracing::info!("listing");
            let whole = st.whole_lists;
            let listed = match self.paged_list(ListOptions::new(rv.clone(), page_size), false, whole).await {
                Err(e) if e.is_expired() || e.is_too_large_resource_version() => {
                    st.rv_unavailable = true;
                    tracing::info!(error = %ErrorChain(&e), "resourceVersion unavailable: relisting at \"\" (consistent read)");
                    self.paged_list(ListOptions::new(st.relist_rv(), page_size), false, whole).await
                }
                other => other,
            }?;
            if rv == "0" && listed.paginated {
                st.paginated_result = true;
            }
            st.rv_unavailable = false;
            let span = tracing::Span::current();
            span.record("pages", listed.pages);
            span.record("items", listed.count);
            let mut items = listed.items;
            items.extend(self.still_cached(&listed.undecodable).into_iter().map(Listed::Object));
            self.hand_over(items, !listed.handed_parts, Some(&listed.resource_version))?;
            tracing::info!(resource_version = %listed.resource_version, "listed");
            st.set_last_sync(&self.shared, listed.resource_version);
            st.whole_lists = false;
            self.shared.synced_once();
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// client-go's pager, from the first page's options: pages with continue tokens; a
    /// continue token that expired falls back to one unpaged list with the same options,
    /// which starts the list over. Every page but the last goes to the sink as soon as it
    /// is decoded; the rest is in what it returns. `started`: the sink has a first part of
    /// this list already (what a widened shard selection keeps), which a list started
    /// over would drop, so an expired continue token fails it instead. `whole`: no page
    /// goes to the sink before the list ends ([`RunState::whole_lists`]); unchanged
    /// objects wait without their listed copy where the cache can hand out its own.
    pub(super) async fn paged_list(
        &self,
        first: ListOptions,
        started: bool,
        whole: bool,
    ) -> Result<PagedList<K>, Error> {
        let mut opts = first.clone();
        let mut listed = PagedList {
            items: Vec::new(),
            handed_parts: started,
            count: 0,
            undecodable: Vec::new(),
            resource_version: String::new(),
            paginated: false,
            pages: 0,
        };
        loop {
            let page = match self.lw.list(&opts).await {
                Ok(page) => page,
                Err(e) if e.is_expired() && opts.continue_token.is_some() && !started => {
                    tracing::info!(
                        pages = listed.pages,
                        "continue token expired: full list instead"
                    );
                    let unpaged = ListOptions {
                        limit: None,
                        ..first
                    };
                    let full = self.lw.list(&unpaged).await?;
                    listed.handed_parts = false;
                    listed.count = full.items.len();
                    listed.items = Vec::with_capacity(full.items.len());
                    for obj in full.items {
                        listed.items.push(self.list_item(self.transformed(obj)?));
                    }
                    listed.undecodable = self.undecodable_keys(full.undecodable);
                    listed.resource_version = full.resource_version;
                    listed.pages += 1;
                    return Ok(listed);
                }
                Err(e) => return Err(e),
            };
            if listed.pages == 0 {
                listed.resource_version = page.resource_version;
            }
            listed.pages += 1;
            listed.count += page.items.len();
            for obj in page.items {
                let item = self.list_item(self.transformed(obj)?);
                listed
                    .items
                    .push(if whole { item.lightened() } else { item });
            }
            let skipped = self.undecodable_keys(page.undecodable);
            listed.undecodable.extend(skipped);
            match page.continue_token {
                Some(token) => {
                    if !whole {
                        let part = std::mem::take(&mut listed.items);
                        self.hand_over(part, !listed.handed_parts, None)?;
                        listed.handed_parts = true;
                        self.paced().await;
                    }
                    opts.continue_token = Some(token);
                    // The server refuses an RV together with a continue token.
                    opts.resource_version.clear();
                    listed.paginated = true;
                }
                None => return Ok(listed),
            }
        }
    }

    /// Reports the objects of a page that did not decode; their keys.
    fn undecodable_keys(&self, objects: Vec<Undecodable>) -> Vec<ObjectKey> {
        objects
            .into_iter()
            .map(|o| {
                let key = o.key.clone();
                self.report_undecodable(o, false);
                key
            })
            .collect()
    }
}

/// What a list collected.
pub(super) struct PagedList<K> {
    /// What is left to hand to the sink.
    pub(super) items: Vec<Listed<K>>,
    /// Whether parts of the list went to the sink already.
    handed_parts: bool,
    /// How many objects the list had, including those handed to the sink in parts.
    pub(super) count: usize,
    /// Keys of the objects that did not decode.
    undecodable: Vec<ObjectKey>,
    pub(super) resource_version: String,
    paginated: bool,
    pages: u32,
}
