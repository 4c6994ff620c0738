package cuda

import (
	"fmt"
	"strconv"

	"github.com/gotune/gotune/internal/sys"
)

// ErrNotSupported is matched (errors.Is) by every error meaning "no usable
// CUDA driver or device here": libcuda.so.1 missing, no device, a driver too
// old for an entry point, or a CUresult that says the device cannot do it.
// It is the same sentinel as sys.ErrNotSupported and
// transports.ErrNotSupported.
var ErrNotSupported = sys.ErrNotSupported

// CUresult values callers and tests need (cuda.h, CUDA 12 and 13).
const (
	CodeSuccess                  = 0
	CodeInvalidValue             = 1
	CodeOutOfMemory              = 2
	CodeNotInitialized           = 3
	CodeDeinitialized            = 4
	CodeStubLibrary              = 34
	CodeInsufficientDriver       = 35
	CodeDeviceUnavailable        = 46
	CodeNoDevice                 = 100
	CodeInvalidDevice            = 101
	CodeInvalidImage             = 200
	CodeInvalidContext           = 201
	CodeNoBinaryForGPU           = 209
	CodePeerAccessUnsupported    = 217
	CodeInvalidPTX               = 218
	CodeUnsupportedPTXVersion    = 222
	CodeInvalidHandle            = 400
	CodeNotFound                 = 500
	CodeNotReady                 = 600
	CodeIllegalAddress           = 700
	CodeLaunchOutOfResources     = 701
	CodeLaunchTimeout            = 702
	CodePeerAccessAlreadyEnabled = 704
	CodePeerAccessNotEnabled     = 705
	CodeContextIsDestroyed       = 709
	CodeHostMemoryRegistered     = 712
	CodeHostMemoryNotRegistered  = 713
	CodeLaunchFailed             = 719
	CodeNotPermitted             = 800
	CodeNotSupported             = 801
	CodeSystemDriverMismatch     = 803
	CodeUnknown                  = 999
)

// codeNames names the codes above when the driver cannot (it is not loaded,
// or cuGetErrorName does not know the code).
var codeNames = map[int]string{
	CodeSuccess:                  "CUDA_SUCCESS",
	CodeInvalidValue:             "CUDA_ERROR_INVALID_VALUE",
	CodeOutOfMemory:              "CUDA_ERROR_OUT_OF_MEMORY",
	CodeNotInitialized:           "CUDA_ERROR_NOT_INITIALIZED",
	CodeDeinitialized:            "CUDA_ERROR_DEINITIALIZED",
	CodeStubLibrary:              "CUDA_ERROR_STUB_LIBRARY",
	CodeInsufficientDriver:       "CUDA_ERROR_INSUFFICIENT_DRIVER",
	CodeDeviceUnavailable:        "CUDA_ERROR_DEVICE_UNAVAILABLE",
	CodeNoDevice:                 "CUDA_ERROR_NO_DEVICE",
	CodeInvalidDevice:            "CUDA_ERROR_INVALID_DEVICE",
	CodeInvalidImage:             "CUDA_ERROR_INVALID_IMAGE",
	CodeInvalidContext:           "CUDA_ERROR_INVALID_CONTEXT",
	CodeNoBinaryForGPU:           "CUDA_ERROR_NO_BINARY_FOR_GPU",
	CodePeerAccessUnsupported:    "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
	CodeInvalidPTX:               "CUDA_ERROR_INVALID_PTX",
	CodeUnsupportedPTXVersion:    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	CodeInvalidHandle:            "CUDA_ERROR_INVALID_HANDLE",
	CodeNotFound:                 "CUDA_ERROR_NOT_FOUND",
	CodeNotReady:                 "CUDA_ERROR_NOT_READY",
	CodeIllegalAddress:           "CUDA_ERROR_ILLEGAL_ADDRESS",
	CodeLaunchOutOfResources:     "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	CodeLaunchTimeout:            "CUDA_ERROR_LAUNCH_TIMEOUT",
	CodePeerAccessAlreadyEnabled: "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
	CodePeerAccessNotEnabled:     "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED",
	CodeContextIsDestroyed:       "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	CodeHostMemoryRegistered:     "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	CodeHostMemoryNotRegistered:  "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	CodeLaunchFailed:             "CUDA_ERROR_LAUNCH_FAILED",
	CodeNotPermitted:             "CUDA_ERROR_NOT_PERMITTED",
	CodeNotSupported:             "CUDA_ERROR_NOT_SUPPORTED",
	CodeSystemDriverMismatch:     "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	CodeUnknown:                  "CUDA_ERROR_UNKNOWN",
}

// Sentinels for errors.Is: an *Error matches the sentinel of its code,
// whatever its operation.
var (
	ErrInvalidValue             = &Error{Code: CodeInvalidValue}
	ErrOutOfMemory              = &Error{Code: CodeOutOfMemory}
	ErrInvalidContext           = &Error{Code: CodeInvalidContext}
	ErrInvalidHandle            = &Error{Code: CodeInvalidHandle}
	ErrNotReady                 = &Error{Code: CodeNotReady}
	ErrIllegalAddress           = &Error{Code: CodeIllegalAddress}
	ErrLaunchTimeout            = &Error{Code: CodeLaunchTimeout}
	ErrLaunchFailed             = &Error{Code: CodeLaunchFailed}
	ErrPeerAccessAlreadyEnabled = &Error{Code: CodePeerAccessAlreadyEnabled}
	ErrPeerAccessNotEnabled     = &Error{Code: CodePeerAccessNotEnabled}
	ErrHostMemoryRegistered     = &Error{Code: CodeHostMemoryRegistered}
	ErrNotPermitted             = &Error{Code: CodeNotPermitted}
)

// Error is a failed driver call.
type Error struct {
	Code int    // the CUresult
	Name string // from cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string // from cuGetErrorString, e.g. "out of memory"
	Op   string // the operation, e.g. "cuMemAlloc 1 GiB"
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = "CUresult " + strconv.Itoa(e.Code)
	}
	s := name
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	return s
}

// Is matches the sentinel of the same code (an *Error without Op), and
// ErrNotSupported for the codes that mean the machine cannot do it.
func (e *Error) Is(target error) bool {
	if target == ErrNotSupported {
		return unsupportedCode(e.Code)
	}
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Code == e.Code
}

// unsupportedCode reports whether a CUresult means "not on this machine"
// rather than a failure of the program.
func unsupportedCode(code int) bool {
	switch code {
	case CodeNoDevice, CodeStubLibrary, CodeInsufficientDriver, CodeNotSupported,
		CodePeerAccessUnsupported, CodeSystemDriverMismatch, CodeDeviceUnavailable:
		return true
	}
	return false
}

// IsCode reports whether err is (or wraps) an *Error with the given CUresult.
func IsCode(err error, code int) bool {
	for err != nil {
		if e, ok := err.(*Error); ok {
			return e.Code == code
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// newError builds the error of a failed call; r is the raw return register.
// The driver names the code when it is loaded; codeNames covers the rest.
func newError(r uintptr, op string) error {
	code := int(int32(uint32(r)))
	e := &Error{Code: code, Op: op}
	if d := loaded(); d != nil {
		e.Name, e.Msg = d.errorStrings(code)
	}
	if e.Name == "" {
		e.Name = codeNames[code]
	}
	return e
}

// notSupported is the ErrNotSupported error of a missing capability.
func notSupported(what, reason string, err error) error {
	return sys.NotSupported(what, reason, err)
}

// Size renders a byte count the way error messages and logs name sizes:
// "1 GiB", "64 KiB", "1.5 MiB", "100 B".
func Size(n int) string {
	const units = "KMGTPE"
	if n < 1024 && n > -1024 {
		return strconv.Itoa(n) + " B"
	}
	v := float64(n)
	i := -1
	for (v >= 1024 || v <= -1024) && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %ciB", int64(v), units[i])
	}
	return fmt.Sprintf("%.3g %ciB", v, units[i])
}
