/// Numbers as `notify` prints them, without Foundation's formatters (which `notify` does not load).
enum NumberText {
    /// `value` with thousands separated by commas: `1,234,567`.
    static func grouped(_ value: UInt64) -> String {
        let digits = String(value)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out += "," }
            out.append(digit)
        }
        return out
    }

    /// `value` rounded to a whole number, thousands separated: `1,234,568`.
    static func grouped(_ value: Double) -> String {
        guard value.isFinite else { return "n/a" }
        return (value < 0 ? "-" : "") + grouped(UInt64(min(value.magnitude.rounded(), Double(UInt64.max / 2))))
    }

    /// `value` rounded to `decimals` digits after the point: `fixed(3.14159, decimals: 2)` is `3.14`;
    /// with `grouping`, the whole part has thousands separators.
    static func fixed(_ value: Double, decimals: Int, grouping: Bool = false) -> String {
        guard value.isFinite else { return "n/a" }
        var scale: UInt64 = 1
        for _ in 0..<decimals { scale *= 10 }
        let scaled = (value.magnitude * Double(scale)).rounded()
        guard scaled < 9e18 else { return String(value) }
        let units = UInt64(scaled)
        let whole = units / scale
        var text = (value < 0 && units > 0 ? "-" : "") + (grouping ? grouped(whole) : String(whole))
        if decimals > 0 {
            let fraction = String(units % scale)
            text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
        }
        return text
    }
}
