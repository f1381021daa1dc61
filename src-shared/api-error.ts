// The error an API call fails with for a reason the caller can act on, whichever host carries it:
// each transport turns its code into its own reply (an HTTP status, an IPC refusal). BUSY: the
// host runs and holds as many jobs as it takes (src-main/services/jobs.ts); try again later.

export class ApiError extends Error {
  constructor(
    readonly code: 'BAD_INPUT' | 'NOT_FOUND' | 'CANCELLED' | 'BUSY',
    message: string,
  ) {
    super(message)
  }
}
