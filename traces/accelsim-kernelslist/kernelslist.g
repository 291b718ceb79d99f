MemcpyHtoD,0x00007f3a7d400000,4096
kernel-1.traceg
MemcpyHtoD,0x00007f3a7d401000,4096
kernel-2.traceg.xz
