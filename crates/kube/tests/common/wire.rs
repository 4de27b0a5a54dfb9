//! Which wire format a lister-watcher really got (the recording client is testenv's).

use kinformer_kube::{KubeListerWatcher, WireFormat};
pub use kinformer_testenv::{ContentTypes, recording_client};
use kube::Client;
use kube::core::Resource;

/// The lister-watcher `make` builds on a client of its own, in `format`, and what its
/// responses were.
pub fn recorded<K>(
    config: kube::Config,
    format: WireFormat,
    make: impl FnOnce(Client) -> KubeListerWatcher<K>,
) -> (KubeListerWatcher<K>, ContentTypes)
where
    K: Resource,
{
    let (client, types) = recording_client(config).expect("a recording client");
    (make(client).wire_format(format), types)
}
