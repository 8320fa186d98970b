import LiveDispatchCore

/// The `FieldError` `body` throws, or nil when it throws none (or another error).
func fieldError(_ body: () throws -> Void) -> FieldError? {
    do {
        try body()
        return nil
    } catch let error as FieldError {
        return error
    } catch {
        return nil
    }
}
