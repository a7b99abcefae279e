package sensors

import "fmt"

// testAddr is the advertiser of the BTHome encryption example.
const testAddr = "54:48:E6:8F:80:A5"

// bthomeAD wraps BTHome service data (device information byte first) in its AD structure.
func bthomeAD(sd string) string { return serviceAD("d2fc", sd) }

func serviceAD(uuidLE, data string) string {
	return fmt.Sprintf("%02x16%s%s", 1+2+len(data)/2, uuidLE, data)
}

func mfrAD(companyLE, data string) string {
	return fmt.Sprintf("%02xff%s%s", 1+2+len(data)/2, companyLE, data)
}
