package sys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gotune/gotune/internal/testutil"
)

// The ioctl numbers and structure sizes are those of knem_io.h at
// KNEM_ABI_VERSION 0x0000000d (knem 1.1.1.90mlnx's common/knem_io.h; the
// same in knem 1.1.4): _IOW('K', 0x10, struct knem_cmd_info) and so on,
// worked out by hand from _IOC(dir, type, nr, size) = dir<<30 | size<<16 |
// type<<8 | nr with _IOC_WRITE 1 and _IOC_READ 2.
func TestKnemABIFromHeader(t *testing.T) {
	if KnemABI != 0xd {
		t.Errorf("KnemABI %#x, knem_io.h says KNEM_ABI_VERSION 0x0000000d", KnemABI)
	}
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"KNEM_CMD_GET_INFO", knemCmdGetInfo, 0x40104b10},
		{"KNEM_CMD_CREATE_REGION", knemCmdCreateRegion, 0xc0204b21},
		{"KNEM_CMD_DESTROY_REGION", knemCmdDestroyRegion, 0x80084b22},
		{"KNEM_CMD_INLINE_COPY_BOUNDED", knemCmdInlineCopyBounded, 0x80384b35},
		{"sizeof(struct knem_cmd_info)", unsafe.Sizeof(KnemInfo{}), 16},
		{"sizeof(struct knem_cmd_param_iovec)", unsafe.Sizeof(knemIovec{}), 16},
		{"sizeof(struct knem_cmd_create_region)", unsafe.Sizeof(knemCreateRegion{}), 32},
		{"offsetof(knem_cmd_create_region, cookie)", unsafe.Offsetof(knemCreateRegion{}.Cookie), 24},
		{"sizeof(struct knem_cmd_inline_copy_bounded)", unsafe.Sizeof(knemInlineCopyBounded{}), 56},
		{"offsetof(knem_cmd_inline_copy_bounded, length)", unsafe.Offsetof(knemInlineCopyBounded{}.Length), 32},
		{"offsetof(knem_cmd_inline_copy_bounded, current_status)", unsafe.Offsetof(knemInlineCopyBounded{}.CurrentStatus), 44},
		{"KNEM_FLAG_SINGLEUSE", KnemFlagSingleUse, 1 << 5},
		{"KNEM_FLAG_DMA", KnemFlagDMA, 1},
		{"KNEM_FEATURE_DMA", KnemFeatureDMA, 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, knem_io.h gives %#x", c.name, c.got, c.want)
		}
	}
}

// Opening a device that is not there, or a node that is not knem's, fails
// saying what and why; only the missing node is "not supported".
func TestOpenKnemErrors(t *testing.T) {
	_, err := OpenKnem(filepath.Join(t.TempDir(), "knem"))
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), "modprobe knem") {
		t.Errorf("missing node: %v", err)
	}
	k, err := OpenKnem("/dev/null") // a device, but not knem's: its ioctls fail
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if _, err := k.Info(); !errors.Is(err, syscall.ENOTTY) || !strings.Contains(err.Error(), "/dev/null") {
		t.Errorf("knem get info on /dev/null: %v, want ENOTTY naming the node", err)
	}
	f := filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if s := nodeAccess(f); !strings.Contains(s, "mode -rw-------") || !strings.Contains(s, "uid") {
		t.Errorf("nodeAccess: %q", s)
	}
}

// Against the real module (when /dev/knem is there): ABI 0xd, a region
// read and written by inline copies, a write refused on a read-only
// region, and a single-use region gone after its first copy.
func TestKnemDevice(t *testing.T) {
	k, err := OpenKnem(KnemDevice)
	testutil.SkipUnless(t, "knem", err)
	defer k.Close()
	info, err := k.Info()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("knem ABI %#x, features %#x, ignored flags %#x, forced flags %#x", info.ABI, info.Features, info.IgnoredFlags, info.ForcedFlags)
	if info.ABI != KnemABI {
		t.Fatalf("driver ABI %#x, gotune speaks %#x", info.ABI, KnemABI)
	}
	region, err := MapAnon(3*PageSize, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(region)
	local, err := MapAnon(3*PageSize, true)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(local)
	for i := range region {
		region[i] = byte(i * 7)
	}
	ro, err := k.CreateRegion(AddressOf(region), len(region), false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.InlineCopy(local[:PageSize+100], ro, 50, false, 0); err != nil {
		t.Fatal(err)
	}
	if string(local[:PageSize+100]) != string(region[50:50+PageSize+100]) {
		t.Error("read from the region at offset 50 differs")
	}
	if err := k.InlineCopy(local[:8], ro, 0, true, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("write into a read-only region: %v, want EACCES", err)
	}
	if err := k.DestroyRegion(ro); err != nil {
		t.Error(err)
	}
	rw, err := k.CreateRegion(AddressOf(region), len(region), true, KnemFlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	copy(local, "written through knem")
	if err := k.InlineCopy(local[:20], rw, uint64(PageSize), true, 0); err != nil {
		t.Fatal(err)
	}
	if got := string(region[PageSize : PageSize+20]); got != "written through knem" {
		t.Errorf("region after a write: %q", got)
	}
	if err := k.InlineCopy(local[:8], rw, 0, true, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("second use of a single-use region: %v, want EINVAL", err)
	}
	if err := k.DestroyRegion(rw); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroying a used single-use region: %v, want EINVAL", err)
	}
}
