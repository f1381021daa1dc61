// The error an API call fails with for a reason the caller can act on, whichever host carries it:
// each transport turns its code into its own reply (an HTTP status, an IPC refusal).

export class ApiError extends Error {
  constructor(
    readonly code: 'BAD_INPUT' | 'NOT_FOUND' | 'CANCELLED',
    message: string,
  ) {
    super(message)
  }
}
