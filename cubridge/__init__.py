"""CuBridge: lift, transfer, verify and lower CUDA attention kernels through CuIR."""
