/// Runs the state log's `fsync` under `sync = always` away from the broker's thread, so that a slow disk holds back
/// only the acknowledgements that wait for it, not every connection's deliveries (issue 38).
///
/// The broker writes each batch's records on its own thread (`write`, cheap: the page cache), then hands the log's
/// descriptor here; the `OK`s that the records back wait in their connections' queues, with what follows them on
/// those connections, until `completion` says the sync is done. While one sync runs, later batches are written and
/// their acknowledgements wait for the next one, which starts when it ends and covers them all (group commit).
/// Without a syncer the broker syncs on its own thread, before the batch's replies leave.
public protocol StateLogSyncer: AnyObject {
    /// `fsync`s `descriptor` elsewhere, then calls `completion` on the broker's thread: with nil, or with the `errno`
    /// of the failure. The descriptor stays open until then.
    func sync(_ descriptor: CInt, completion: @escaping (_ failure: CInt?) -> Void)
}
