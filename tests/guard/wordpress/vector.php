<?php
// The guard's own reading of the shared test vector (tests/guard/vector.json), without WordPress: prints one line
// per case, "accepted <action>" or "refused", and per site pair "same" or "different".
define( 'ABSPATH', __DIR__ . '/' );
require dirname( __DIR__, 3 ) . '/guard/plugin/fleet-guard/guard.php';
$vector = json_decode( file_get_contents( $argv[1] ), true );
$keys   = array( $vector['public'] );
$cases  = array_merge( array( 'body' => $vector['body'] ), $vector['refused'] );
foreach ( $cases as $name => $body ) {
	$envelope = Fleet_Guard::open_body( $body, $keys );
	echo $name, ': ', null === $envelope ? 'refused' : 'accepted ' . $envelope['action'] . ' ' . $envelope['nonce'], "\n";
}
foreach ( $vector['sites'] as $kind => $pairs ) {
	foreach ( $pairs as $pair ) {
		echo $kind, ' ', $pair[0], ' ', $pair[1], ': ', Fleet_Guard::same_site( $pair[0], $pair[1] ) ? 'same' : 'different', "\n";
	}
}
