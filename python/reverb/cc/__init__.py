"""Protocol buffer modules, under dm-reverb's module names."""
