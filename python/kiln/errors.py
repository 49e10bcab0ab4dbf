"""kiln's Python exception: every failure of libkiln (and every argument the Python layer rejects) raises
KilnError carrying kiln's own message, which names what was expected and what came."""

# libkiln's status codes (capi/kiln_c.h, enum kiln_status); the values are part of the C ABI.
OK = 0
ERROR = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_UNAVAILABLE = 3
ERROR_OUT_OF_MEMORY = 4
ERROR_INTERNAL = 5
ERROR_UNKNOWN = 6

STATUS_NAMES = {
    OK: "KILN_OK",
    ERROR: "KILN_ERROR",
    ERROR_INVALID_ARGUMENT: "KILN_ERROR_INVALID_ARGUMENT",
    ERROR_UNAVAILABLE: "KILN_ERROR_UNAVAILABLE",
    ERROR_OUT_OF_MEMORY: "KILN_ERROR_OUT_OF_MEMORY",
    ERROR_INTERNAL: "KILN_ERROR_INTERNAL",
    ERROR_UNKNOWN: "KILN_ERROR_UNKNOWN",
}


class KilnError(Exception):
    """A failed kiln call. `status` is libkiln's code (KILN_ERROR for a caller's mistake), `str(e)` kiln's
    message."""

    def __init__(self, message, status=ERROR):
        super().__init__(message)
        self.status = status

    @property
    def status_name(self):
        return STATUS_NAMES.get(self.status, str(self.status))


class KilnUnavailableError(KilnError):
    """The call needs a GPU (CUDA driver, device, NVRTC) that this machine does not have."""


def error_for(status, message):
    cls = KilnUnavailableError if status == ERROR_UNAVAILABLE else KilnError
    return cls(message, status)
