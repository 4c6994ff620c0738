package knem

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/sys"
)

func TestCheckInfo(t *testing.T) {
	for _, c := range []struct {
		info sys.KnemInfo
		dma  string
		want string // "" for usable
	}{
		{sys.KnemInfo{ABI: 0xd}, "off", ""},
		{sys.KnemInfo{ABI: 0xd}, "auto", ""},
		{sys.KnemInfo{ABI: 0xd, Features: sys.KnemFeatureDMA}, "on", ""},
		{sys.KnemInfo{ABI: 0xc}, "off", "knem: not supported: ABI 0xc unsupported (gotune speaks ABI 0xd"},
		{sys.KnemInfo{ABI: 0xe, Features: sys.KnemFeatureDMA}, "auto", "ABI 0xe unsupported"},
		{sys.KnemInfo{ABI: 0xd}, "on", "the driver reports no DMA engine (features 0x0)"},
	} {
		err := checkInfo(Info{KnemInfo: c.info, Device: "/dev/knem"}, c.dma)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v dma=%s: %v", c.info, c.dma, err)
		case c.want != "" && (!errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v dma=%s: %v, want ErrNotSupported saying %q", c.info, c.dma, err, c.want)
		}
	}
}

// The fake keeps the cookie contract: an unknown cookie, a write into a
// read-only region, a second use of a single-use one and another
// process's destroy fail as the driver's would; a copy stops at the
// region's end; Close removes what is left.
func TestFakeContract(t *testing.T) {
	d, err := openFake()
	if err != nil {
		t.Fatal(err)
	}
	buf, err := sys.MapAnon(8192, true)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Unmap(buf)
	copy(buf, "region bytes")
	local := make([]byte, 64)
	pid := os.Getpid()
	ro, err := d.CreateRegion(sys.AddressOf(buf), 12, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.InlineCopy(pid, local, ro, 0, false, 0); err != nil || string(local[:12]) != "region bytes" || local[12] != 0 {
		t.Errorf("read: %v, %q", err, local[:13])
	}
	if err := d.InlineCopy(pid, local[:4], ro, 0, true, 0); !errors.Is(err, syscall.EACCES) {
		t.Errorf("write into a read-only region: %v", err)
	}
	if err := d.InlineCopy(pid, local[:4], ro+1000, 0, false, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("unknown cookie: %v", err)
	}
	if err := d.InlineCopy(pid+1, local[:4], ro, 0, false, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("cookie copied as another pid's: %v", err)
	}
	if err := d.DestroyRegion(ro ^ 1<<40); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("destroying another process's region: %v", err)
	}
	once, err := d.CreateRegion(sys.AddressOf(buf), 8192, true, sys.KnemFlagSingleUse)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.InlineCopy(pid, []byte("new"), once, 100, true, 0); err != nil || string(buf[100:103]) != "new" {
		t.Errorf("write at offset 100: %v, %q", err, buf[100:103])
	}
	if err := d.InlineCopy(pid, local[:4], once, 0, true, 0); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("second use of a single-use region: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.record(ro)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left region %#x's record: %v", ro, err)
	}
}
