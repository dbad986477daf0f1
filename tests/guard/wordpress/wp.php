<?php
// What the test does on the server: php wp.php install|activate PLUGIN|upgrade PLUGIN ZIP|active
$fleet_action = $argv[1];
if ( 'install' === $fleet_action ) {
	define( 'WP_INSTALLING', true );
}
require __DIR__ . '/config.php';
$_SERVER['HTTP_HOST'] = parse_url( WP_HOME, PHP_URL_HOST );
require ABSPATH . 'wp-settings.php';
require_once ABSPATH . 'wp-admin/includes/plugin.php';
if ( 'install' === $fleet_action ) {
	require_once ABSPATH . 'wp-admin/includes/upgrade.php';
	wp_install( 'Guard test', 'admin', 'admin@example.org', false, '', 'not-used-' . wp_generate_password( 20 ) );
	update_option( 'template', 'plain' );
	update_option( 'stylesheet', 'plain' );
	echo "installed\n";
} elseif ( 'activate' === $fleet_action ) {
	$result = activate_plugin( $argv[2] );
	echo is_wp_error( $result ) ? 'error: ' . $result->get_error_message() : 'activated', "\n";
	echo 'problem: ', (string) get_option( 'fleet_guard_problem' ), "\n";
} elseif ( 'deactivate' === $fleet_action ) {
	deactivate_plugins( $argv[2] );
	echo "deactivated\n";
} elseif ( 'upgrade' === $fleet_action ) {
	require_once ABSPATH . 'wp-admin/includes/admin.php';
	require_once ABSPATH . 'wp-admin/includes/class-wp-upgrader.php';
	$upgrader = new Plugin_Upgrader( new Automatic_Upgrader_Skin() );
	$result   = $upgrader->run( array(
		'package'           => $argv[3],
		'destination'       => WP_PLUGIN_DIR,
		'clear_destination' => true,
		'clear_working'     => true,
		'hook_extra'        => array( 'plugin' => $argv[2], 'type' => 'plugin', 'action' => 'update' ),
	) );
	echo is_wp_error( $result ) ? 'error: ' . $result->get_error_message() : ( $result ? 'upgraded' : 'failed' ), "\n";
} elseif ( 'active' === $fleet_action ) {
	echo wp_json_encode( array_values( (array) get_option( 'active_plugins' ) ) ), "\n";
}
