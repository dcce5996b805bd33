module github.com/toolhost/toolhost

go 1.26.0
