#include "textflag.h"

// func copyMovsb(dst, src unsafe.Pointer, n uintptr)
TEXT ·copyMovsb(SB),NOSPLIT,$0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	REP; MOVSB
	RET

// func copyStream(dst, src unsafe.Pointer, n uintptr)
// n is a positive multiple of 64 and dst is 64-byte aligned.
TEXT ·copyStream(SB),NOSPLIT,$0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $6, CX
loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop
	SFENCE
	RET
