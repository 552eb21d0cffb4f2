import Logging
import NotifyProtocol
import NotifyBroker

extension PeerCredentials {
    /// The peer as log fields: `PEER_UID`, `PEER_PID` and, when known, `PEER_UNIT` in the journal.
    var logMetadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["peer_uid": "\(uid)", "peer_pid": "\(pid)"]
        if let unit { metadata["peer_unit"] = "\(unit)" }
        return metadata
    }
}
