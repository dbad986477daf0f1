#!/bin/sh
# Writes php_version_compare.tsv: PHP's own version_compare() of every pair of the versions in php_versions.txt
# (one a line; the tests read both columns byte for byte). Made once with Debian 12's php8.2-cli
# (`apt-get install php-cli`); the tests need no PHP.
cd "$(dirname "$0")" && php -r '
$versions = array_map(fn($l) => rtrim($l, "\n"), file("php_versions.txt"));
$out = fopen("php_version_compare.tsv", "w");
fwrite($out, "# version1\tversion2\tversion_compare (" . PHP_VERSION . ")\n");
foreach ($versions as $a) foreach ($versions as $b) fwrite($out, "$a\t$b\t" . version_compare($a, $b) . "\n");
'
