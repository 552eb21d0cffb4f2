#define _GNU_SOURCE
#include "FileSpace.h"

#include <fcntl.h>

int notifyd_allocate(int descriptor, off_t offset, off_t length)
{
	return fallocate(descriptor, 0, offset, length);
}
