#include "textflag.h"

// func CPURelax()
TEXT ·CPURelax(SB),NOSPLIT,$0-0
	PAUSE
	RET

// func PollFence()
TEXT ·PollFence(SB),NOSPLIT,$0-0
	LFENCE
	RET
