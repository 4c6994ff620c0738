//go:build !race

#include "textflag.h"

// func StoreRelaxed(p *uint32, v uint32)
TEXT ·StoreRelaxed(SB),NOSPLIT,$0-12
	MOVQ p+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
