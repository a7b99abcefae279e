module devhost/abi

go 1.26.8
