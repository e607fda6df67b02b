package mcptools

const crashChildEnv = "MCPTOOLS_CRASH_CHILD"

func crashChild() int { return 0 }
