package sys

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// The structures and commands against hpc/xpmem 2.6.5's include/xpmem_internal.h
// (XPMEM_CURRENT_VERSION 0x00026005), x86-64 (LP64: off_t,
// size_t and __u64 are 8 bytes, int 4, natural alignment).
func TestXPMEMLayoutMatchesHeader2_6_5(t *testing.T) {
	type field struct {
		name      string
		off, size uintptr
	}
	var mk xpmemCmdMakeArg
	var get xpmemCmdGetArg
	var att xpmemCmdAttachArg
	var id xpmemCmdIDArg
	cases := []struct {
		strct  string
		size   uintptr
		got    []field
		header []field
	}{
		{"xpmem_cmd_make", unsafe.Sizeof(mk),
			[]field{{"vaddr", unsafe.Offsetof(mk.vaddr), unsafe.Sizeof(mk.vaddr)}, {"size", unsafe.Offsetof(mk.size), unsafe.Sizeof(mk.size)}, {"permit_type", unsafe.Offsetof(mk.permitType), unsafe.Sizeof(mk.permitType)}, {"permit_value", unsafe.Offsetof(mk.permitValue), unsafe.Sizeof(mk.permitValue)}, {"segid", unsafe.Offsetof(mk.segid), unsafe.Sizeof(mk.segid)}},
			[]field{{"vaddr", 0, 8}, {"size", 8, 8}, {"permit_type", 16, 4}, {"permit_value", 24, 8}, {"segid", 32, 8}}},
		{"xpmem_cmd_get", unsafe.Sizeof(get),
			[]field{{"segid", unsafe.Offsetof(get.segid), unsafe.Sizeof(get.segid)}, {"flags", unsafe.Offsetof(get.flags), unsafe.Sizeof(get.flags)}, {"permit_type", unsafe.Offsetof(get.permitType), unsafe.Sizeof(get.permitType)}, {"permit_value", unsafe.Offsetof(get.permitValue), unsafe.Sizeof(get.permitValue)}, {"apid", unsafe.Offsetof(get.apid), unsafe.Sizeof(get.apid)}},
			[]field{{"segid", 0, 8}, {"flags", 8, 4}, {"permit_type", 12, 4}, {"permit_value", 16, 8}, {"apid", 24, 8}}},
		{"xpmem_cmd_attach", unsafe.Sizeof(att),
			[]field{{"apid", unsafe.Offsetof(att.apid), unsafe.Sizeof(att.apid)}, {"offset", unsafe.Offsetof(att.offset), unsafe.Sizeof(att.offset)}, {"size", unsafe.Offsetof(att.size), unsafe.Sizeof(att.size)}, {"vaddr", unsafe.Offsetof(att.vaddr), unsafe.Sizeof(att.vaddr)}, {"fd", unsafe.Offsetof(att.fd), unsafe.Sizeof(att.fd)}, {"flags", unsafe.Offsetof(att.flags), unsafe.Sizeof(att.flags)}},
			[]field{{"apid", 0, 8}, {"offset", 8, 8}, {"size", 16, 8}, {"vaddr", 24, 8}, {"fd", 32, 4}, {"flags", 36, 4}}},
		{"xpmem_cmd_remove/release/detach", unsafe.Sizeof(id),
			[]field{{"segid|apid|vaddr", unsafe.Offsetof(id.id), unsafe.Sizeof(id.id)}},
			[]field{{"segid|apid|vaddr", 0, 8}}},
	}
	headerSize := map[string]uintptr{"xpmem_cmd_make": 40, "xpmem_cmd_get": 32, "xpmem_cmd_attach": 40, "xpmem_cmd_remove/release/detach": 8}
	for _, c := range cases {
		if c.size != headerSize[c.strct] {
			t.Errorf("%s: size %d, header %d", c.strct, c.size, headerSize[c.strct])
		}
		for i, f := range c.got {
			if f != c.header[i] {
				t.Errorf("%s.%s: offset %d size %d, header offset %d size %d", c.strct, f.name, f.off, f.size, c.header[i].off, c.header[i].size)
			}
		}
	}
	// _IO(type, nr) = (_IOC_NONE << 30) | (0 << 16) | (type << 8) | nr
	io := func(nr uintptr) uintptr { return 0<<30 | 0<<16 | uintptr('x')<<8 | nr }
	for nr, cmd := range []uintptr{xpmemCmdVersion, xpmemCmdMake, xpmemCmdRemove, xpmemCmdGet, xpmemCmdRelease, xpmemCmdAttach, xpmemCmdDetach} {
		if cmd != io(uintptr(nr)) {
			t.Errorf("command %d: %#x, header _IO('x', %d) = %#x", nr, cmd, nr, io(uintptr(nr)))
		}
	}
	if XPMEMMaxAddrSize != 0xffffffffffffffff || xpmemPermitMode != 1 || xpmemRDWR != 2 {
		t.Errorf("constants differ from the header: XPMEM_MAXADDR_SIZE %#x, XPMEM_PERMIT_MODE %d, XPMEM_RDWR %d", XPMEMMaxAddrSize, xpmemPermitMode, xpmemRDWR)
	}
}

func TestCheckXPMEMVersion(t *testing.T) {
	for _, c := range []struct {
		v  uint32
		ok bool
	}{{0x00026005, true}, {0x00026000, true}, {0x00026fff, true}, {0x00025001, false}, {0x00027000, false}, {0x00030000, false}, {0, false}} {
		err := CheckXPMEMVersion(c.v)
		if (err == nil) != c.ok {
			t.Errorf("version %#x: %v, want ok=%v", c.v, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "unsupported")) {
			t.Errorf("version %#x: %v does not match ErrNotSupported or say unsupported", c.v, err)
		}
	}
}

// A missing device node is "not here", and says which node.
func TestOpenXPMEMMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "xpmem")
	_, err := OpenXPMEM(p)
	if !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), p+" missing") {
		t.Fatalf("got %v, want ErrNotSupported naming %s missing", err, p)
	}
}
