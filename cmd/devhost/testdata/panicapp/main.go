// Command panicapp is a firmware image that identifies itself as devhost 9.9.1 and panics as
// soon as it boots: the black-box tests install it to see the bootloader roll back.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "--version":
			fmt.Println("9.9.1")
			return
		case "--build-info":
			fmt.Println(`{"project":"devhost","version":"9.9.1","target":"esp32s3","build_time":""}`)
			return
		}
	}
	panic("panicapp: this image cannot start")
}
