/// The release of notifyd that this library belongs to, printed by `notifyd --version` and `notify --version`.
public enum NotifydRelease {
    /// The version string.
    public static let version = "0.2.0"
}
