module github.com/chorusrt/chorus

go 1.26

require (
	go.uber.org/goleak v1.3.0
	gopkg.in/yaml.v3 v3.0.1
)

require github.com/kr/text v0.2.0 // indirect
