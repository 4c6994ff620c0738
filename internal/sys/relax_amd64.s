#include "textflag.h"

// func CPURelax()
TEXT ·CPURelax(SB),NOSPLIT,$0-0
	PAUSE
	RET

// func PollFence()
TEXT ·PollFence(SB),NOSPLIT,$0-0
	LFENCE
	RET

// func PrefetchWrite(p unsafe.Pointer)
TEXT ·PrefetchWrite(SB),NOSPLIT,$0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX): the Go assembler does not name it
	RET
