module devhost/sdk

go 1.26.8

require devhost/abi v0.0.0-00010101000000-000000000000

replace devhost/abi => ../abi
