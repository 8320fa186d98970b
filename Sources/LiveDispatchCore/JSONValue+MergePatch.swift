extension JSONValue {
    /// Applies `patch` to this value as a JSON merge patch (RFC 7386).
    ///
    /// An object patch sets each of its members on the target (an object, or
    /// `{}` when the target is not one), removing members whose patch value
    /// is `null` and merging nested objects recursively. Any other patch
    /// replaces the target whole.
    public func applyingMergePatch(_ patch: JSONValue) -> JSONValue {
        guard case .object(let patchFields) = patch else { return patch }
        var fields = objectValue ?? [:]
        for (key, patchValue) in patchFields {
            if patchValue.isNull {
                fields.removeValue(forKey: key)
            } else {
                fields[key] = (fields[key] ?? .null).applyingMergePatch(patchValue)
            }
        }
        return .object(fields)
    }

    /// Applies `patch` in place as a JSON merge patch (RFC 7386).
    public mutating func applyMergePatch(_ patch: JSONValue) {
        self = applyingMergePatch(patch)
    }
}
