<?php
/**
 * Fleet Guard: the guard itself. Loaded by the must-use loader before every plugin (or, where the loader is missing,
 * by the plugin's own file), it answers only requests the fleet signed, and keeps each plugin's and theme's files
 * before an update replaces them.
 *
 * A request to the guard is a POST to any front-end address of the site with the header `X-Fleet-Guard: 1` and the
 * body {"envelope": base64url(JSON), "signature": base64url(Ed25519 signature of those JSON bytes)}. The envelope
 * says {"v": 1, "site": the site's home URL, "action", "ts": unix seconds, "nonce", and the action's arguments}.
 * Anything else, unsigned, badly signed, for another site, outside the allowed clock skew, replayed, oversized or
 * beyond the rate limit, is left to WordPress: an ordinary page, and nothing done.
 *
 * Actions: status; probe (this very request, with `plugins` and, with `theme: true`, the theme left out; the answer
 * says how the page came out); pause / unpause (`plugins`: left out of every request until the pause is lifted, as
 * WordPress's recovery mode pauses a plugin); restore (`type`, `slug`, `version`: a kept version put back).
 * Every answer is one line, `FLEET-GUARD-REPORT: {json}`, echoing the request's nonce.
 *
 * @package fleet-guard
 * @license GPL-2.0-or-later
 */

if ( ! defined( 'ABSPATH' ) ) {
	exit;
}

if ( class_exists( 'Fleet_Guard' ) ) {
	return;
}

/** The request handling: verification, then one action. */
final class Fleet_Guard {
	const VERSION         = '1.0.0';
	const PROTOCOL        = 1;
	const MODE_MUST_USE   = 'must-use';
	const MODE_PLUGIN     = 'plugin';
	const MARKER          = 'FLEET-GUARD-REPORT: ';
	const MAX_BODY        = 8192;
	const DEFAULT_SKEW    = 300;
	const DEFAULT_RATE    = 60;
	const NAME_PATTERN    = '#^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+\.php)?$#';
	const NONCE_PATTERN   = '/^[A-Za-z0-9_-]{16,64}$/';
	const PAUSE_PRIORITY  = PHP_INT_MAX;

	/** @var string */
	private static $data_dir = '';
	/** @var string */
	private static $mode = '';
	/** @var array<string, bool> plugins left out of this request's loading */
	private static $left_out = array();
	/** @var bool */
	private static $theme_left_out = false;
	/** @var array<string, mixed>|null the probe being answered */
	private static $probe = null;

	/** Start the guard for this request: pauses, the keep hook, and a signed request's answer. */
	public static function boot( $data_dir, $mode ) {
		if ( self::$mode !== '' ) {
			return;
		}
		self::$data_dir = $data_dir;
		self::$mode     = $mode;
		$state          = new Fleet_Guard_State( $data_dir );
		if ( self::MODE_MUST_USE === $mode ) {
			foreach ( $state->paused() as $plugin ) {
				self::$left_out[ $plugin ] = true;
			}
		}
		add_filter( 'upgrader_pre_install', array( 'Fleet_Guard_Keep', 'before_install' ), 1, 2 );
		if ( isset( $_SERVER['HTTP_X_FLEET_GUARD'] ) && isset( $_SERVER['REQUEST_METHOD'] )
			&& 'POST' === $_SERVER['REQUEST_METHOD'] ) {
			$envelope = self::verified( $state );
			if ( null !== $envelope ) {
				self::answer( $envelope, $state );
			}
		}
		self::leave_out_while_loading();
	}

	/** The request's envelope if it is the fleet's, unused and fresh; null leaves the request to WordPress. */
	private static function verified( Fleet_Guard_State $state ) {
		if ( ! $state->within_rate( self::setting( 'FLEET_GUARD_RATE', self::DEFAULT_RATE ) ) ) {
			return null;
		}
		$length = isset( $_SERVER['CONTENT_LENGTH'] ) ? (int) $_SERVER['CONTENT_LENGTH'] : 0;
		if ( $length <= 0 || $length > self::MAX_BODY || ! function_exists( 'sodium_crypto_sign_verify_detached' ) ) {
			return null;
		}
		$raw      = file_get_contents( 'php://input', false, null, 0, self::MAX_BODY + 1 );
		$envelope = is_string( $raw ) ? self::open_body( $raw, self::public_keys() ) : null;
		if ( null === $envelope || ! self::fresh( $envelope ) ) {
			return null;
		}
		if ( 'status' === $envelope['action'] && ! $state->writable() ) {
			return $envelope; // a look that changes nothing, answered even where nonces cannot be remembered
		}
		return $state->first_use( $envelope['nonce'], (int) $envelope['ts'], self::skew() ) ? $envelope : null;
	}

	/** The envelope of a request body signed by one of `$keys` (base64 public keys), or null. */
	public static function open_body( $raw, array $keys ) {
		$body = strlen( $raw ) <= self::MAX_BODY ? json_decode( $raw, true, 4 ) : null;
		if ( ! is_array( $body ) || ! isset( $body['envelope'], $body['signature'] )
			|| ! is_string( $body['envelope'] ) || ! is_string( $body['signature'] ) ) {
			return null;
		}
		$bytes     = self::unbase64url( $body['envelope'] );
		$signature = self::unbase64url( $body['signature'] );
		if ( false === $bytes || false === $signature || SODIUM_CRYPTO_SIGN_BYTES !== strlen( $signature ) ) {
			return null;
		}
		foreach ( $keys as $encoded ) {
			$key = base64_decode( (string) $encoded, true );
			if ( false !== $key && SODIUM_CRYPTO_SIGN_PUBLICKEYBYTES === strlen( $key )
				&& sodium_crypto_sign_verify_detached( $signature, $bytes, $key ) ) {
				$envelope = json_decode( $bytes, true, 8 );
				return is_array( $envelope ) ? $envelope : null;
			}
		}
		return null;
	}

	/** @return string[] */
	public static function public_keys() {
		$keys = include __DIR__ . '/keys.php';
		return is_array( $keys ) ? array_values( $keys ) : array();
	}

	/** A well-formed envelope for this site, within the allowed skew. */
	private static function fresh( array $envelope ) {
		$actions = array( 'status', 'probe', 'pause', 'unpause', 'restore' );
		if ( ! isset( $envelope['v'], $envelope['site'], $envelope['action'], $envelope['ts'], $envelope['nonce'] )
			|| self::PROTOCOL !== $envelope['v'] || ! is_int( $envelope['ts'] ) || ! is_string( $envelope['site'] )
			|| ! is_string( $envelope['nonce'] ) || ! preg_match( self::NONCE_PATTERN, $envelope['nonce'] )
			|| ! in_array( $envelope['action'], $actions, true ) ) {
			return false;
		}
		return abs( time() - $envelope['ts'] ) <= self::skew() && self::same_site( $envelope['site'], home_url( '/' ) );
	}

	private static function skew() {
		return (int) self::setting( 'FLEET_GUARD_SKEW', self::DEFAULT_SKEW );
	}

	/** Host, port and path compared (not the scheme: a site behind a proxy may not know its own). */
	public static function same_site( $signed, $home ) {
		$key = function ( $url ) {
			$parts = parse_url( $url );
			if ( ! is_array( $parts ) || empty( $parts['host'] ) ) {
				return null;
			}
			$port = isset( $parts['port'] ) ? ':' . $parts['port'] : '';
			$path = isset( $parts['path'] ) ? rtrim( $parts['path'], '/' ) : '';
			return strtolower( $parts['host'] ) . $port . $path;
		};
		$a = $key( $signed );
		return null !== $a && $a === $key( $home );
	}

	private static function setting( $name, $default ) {
		return defined( $name ) ? constant( $name ) : $default;
	}

	private static function unbase64url( $text ) {
		if ( ! preg_match( '/^[A-Za-z0-9_-]*={0,2}$/', $text ) ) {
			return false;
		}
		return base64_decode( strtr( $text, '-_', '+/' ), true );
	}

	/** Carry out a verified request: answer and stop, or (a probe) let WordPress render it and report. */
	private static function answer( array $envelope, Fleet_Guard_State $state ) {
		$action = $envelope['action'];
		if ( 'status' === $action ) {
			self::reply( $envelope, self::status( $state ) );
		}
		if ( self::MODE_MUST_USE !== self::$mode ) {
			self::reply( $envelope, array( 'ok' => false, 'error' => 'the must-use loader is missing: '
				. 'the guard loads after other plugins and cannot ' . $action ) );
		}
		if ( 'restore' === $action ) {
			self::reply( $envelope, Fleet_Guard_Keep::restore( self::$data_dir, $envelope ) );
		}
		$plugins = self::named_plugins( isset( $envelope['plugins'] ) ? $envelope['plugins'] : array() );
		if ( null === $plugins ) {
			self::reply( $envelope, array( 'ok' => false, 'error' => 'plugins must name installed plugins' ) );
		}
		if ( 'pause' === $action || 'unpause' === $action ) {
			$paused = $state->pause( $plugins, 'pause' === $action );
			if ( null === $paused ) {
				self::reply( $envelope, array( 'ok' => false, 'error' => 'the guard data folder is not writable' ) );
			}
			self::reply( $envelope, array( 'ok' => true, 'paused' => $paused ) );
		}
		// a probe: this request runs without them, as a GET, and the shutdown reports how it came out
		foreach ( $plugins as $plugin ) {
			self::$left_out[ $plugin ] = true;
		}
		self::$theme_left_out = ! empty( $envelope['theme'] );
		self::$probe          = array( 'nonce' => $envelope['nonce'], 'plugins' => $plugins,
			'theme' => self::$theme_left_out );
		$_SERVER['REQUEST_METHOD'] = 'GET';
		$_POST                     = array();
		if ( self::$theme_left_out ) {
			$none = function () {
				return 'fleet-guard-no-theme';
			};
			add_filter( 'pre_option_template', $none, self::PAUSE_PRIORITY );
			add_filter( 'pre_option_stylesheet', $none, self::PAUSE_PRIORITY );
		}
		ob_start( array( __CLASS__, 'probe_output' ) );
		register_shutdown_function( array( __CLASS__, 'close_probe' ) );
	}

	/** The names checked against what is installed (no path can leave the plugins folder); null when one is not. */
	private static function named_plugins( $names ) {
		if ( ! is_array( $names ) || count( $names ) > 200 ) {
			return null;
		}
		$installed = self::installed_plugins();
		$chosen    = array();
		foreach ( $names as $name ) {
			if ( ! is_string( $name ) || ! preg_match( self::NAME_PATTERN, $name ) || false !== strpos( $name, '..' )
				|| ! isset( $installed[ $name ] ) ) {
				return null;
			}
			$chosen[] = $name;
		}
		return array_values( array_unique( $chosen ) );
	}

	/** @return array<string, array> the installed plugins by basename (their headers read, none loaded) */
	public static function installed_plugins() {
		if ( ! function_exists( 'get_plugins' ) ) {
			require_once ABSPATH . 'wp-admin/includes/plugin.php';
		}
		return get_plugins();
	}

	/** While WordPress loads plugins, the paused ones and a probe's chosen ones are left out of its list; after that
	 * the list reads as stored, so that switching a plugin off through the dashboard writes what is really stored. */
	private static function leave_out_while_loading() {
		if ( ! self::$left_out ) {
			return;
		}
		$filter = array( __CLASS__, 'without_left_out' );
		add_filter( 'option_active_plugins', $filter, self::PAUSE_PRIORITY );
		add_filter( 'site_option_active_sitewide_plugins', $filter, self::PAUSE_PRIORITY );
		add_action(
			'plugins_loaded',
			function () use ( $filter ) {
				remove_filter( 'option_active_plugins', $filter, Fleet_Guard::PAUSE_PRIORITY );
				remove_filter( 'site_option_active_sitewide_plugins', $filter, Fleet_Guard::PAUSE_PRIORITY );
			},
			PHP_INT_MIN
		);
	}

	/** @internal the active plugins less those left out (a list, or network plugins keyed by basename) */
	public static function without_left_out( $plugins ) {
		if ( ! is_array( $plugins ) ) {
			return $plugins;
		}
		$kept = array();
		foreach ( $plugins as $key => $value ) {
			$name = is_string( $key ) ? $key : $value;
			if ( ! isset( self::$left_out[ $name ] ) ) {
				$kept[ $key ] = $value;
			}
		}
		return is_string( key( $plugins ) ) ? $kept : array_values( $kept );
	}

	/** @internal the probe's output buffer: the page is held, and its end replaced by the report of how it came out
	 * (an output handler, so that it runs however the buffers are closed: WordPress flushes them all at shutdown) */
	public static function probe_output( $buffer, $phase ) {
		self::$probe['output'] = ( isset( self::$probe['output'] ) ? self::$probe['output'] : '' ) . $buffer;
		if ( ! ( $phase & PHP_OUTPUT_HANDLER_FINAL ) || ! empty( self::$probe['reported'] ) ) {
			return '';
		}
		self::$probe['reported'] = true;
		$output = self::$probe['output'];
		$status = (int) http_response_code();
		$error  = error_get_last();
		$fatal  = null;
		if ( is_array( $error ) && in_array( $error['type'], array( E_ERROR, E_PARSE, E_CORE_ERROR, E_COMPILE_ERROR,
			E_USER_ERROR, E_RECOVERABLE_ERROR ), true ) ) {
			$fatal = array( 'message' => substr( (string) $error['message'], 0, 500 ),
				'file' => self::relative( (string) $error['file'] ), 'line' => (int) $error['line'] );
		}
		$critical = false !== strpos( $output, 'There has been a critical error' )
			|| false !== strpos( $output, 'wp-die-message' );
		return self::answer_line( array( 'nonce' => self::$probe['nonce'], 'action' => 'probe' ), array(
			'ok'             => true,
			'status'         => ( null !== $fatal || $critical ) && $status < 500 ? 500 : $status,
			'page_status'    => $status,
			'up'             => $status >= 200 && $status < 400 && null === $fatal && ! $critical,
			'fatal'          => $fatal,
			'critical'       => $critical,
			'bytes'          => strlen( $output ),
			'left_out'       => self::$probe['plugins'],
			'theme_left_out' => self::$probe['theme'],
		) );
	}

	/** @internal at shutdown, every buffer is closed so that the probe's handler reports (if nothing did yet) */
	public static function close_probe() {
		while ( ob_get_level() > 0 && empty( self::$probe['reported'] ) ) {
			if ( ! @ob_end_flush() ) {
				break;
			}
		}
	}

	private static function relative( $path ) {
		foreach ( array( WP_PLUGIN_DIR, get_theme_root(), WP_CONTENT_DIR, ABSPATH ) as $root ) {
			$root = rtrim( $root, '/' ) . '/';
			if ( 0 === strpos( $path, $root ) ) {
				return substr( $path, strlen( $root ) );
			}
		}
		return basename( $path );
	}

	/** The guard's answer, and the end of the request. */
	private static function reply( array $envelope, array $answer ) {
		echo self::answer_line( $envelope, $answer ); // phpcs:ignore WordPress.Security.EscapeOutput -- JSON
		exit;
	}

	/** One marker line of JSON (echoing the request's nonce), sent as plain text with status 200 where the headers
	 * can still be set. */
	private static function answer_line( array $envelope, array $answer ) {
		$answer = array_merge( array( 'guard' => 'fleet-guard', 'version' => self::VERSION, 'protocol' => self::PROTOCOL,
			'nonce' => $envelope['nonce'], 'action' => $envelope['action'] ), $answer );
		if ( ! headers_sent() ) {
			header_remove();
			http_response_code( 200 );
			header( 'Content-Type: text/plain; charset=utf-8' );
			header( 'Cache-Control: no-store' );
			header( 'X-Robots-Tag: noindex' );
		}
		return "\n" . self::MARKER . wp_json_encode( $answer ) . "\n";
	}

	/** What the guard is, keeps and pauses, and the site's plugins and themes as installed. */
	private static function status( Fleet_Guard_State $state ) {
		$plugins = array();
		$active  = (array) get_option( 'active_plugins', array() );
		foreach ( self::installed_plugins() as $name => $headers ) {
			$plugins[ $name ] = array( 'version' => (string) $headers['Version'],
				'active' => in_array( $name, $active, true ) );
		}
		$themes = array();
		foreach ( (array) glob( get_theme_root() . '/*/style.css' ) as $style ) {
			$headers = get_file_data( $style, array( 'Version' => 'Version' ) );
			$themes[ basename( dirname( $style ) ) ] = (string) $headers['Version'];
		}
		$problems = $state->problems();
		if ( self::MODE_MUST_USE !== self::$mode ) {
			$problems[] = 'the must-use loader is missing' . ( get_option( 'fleet_guard_problem' )
				? ': ' . get_option( 'fleet_guard_problem' ) : '' );
		}
		if ( ! $state->writable() ) {
			$problems[] = 'the guard data folder is not writable: nothing can be paused or kept';
		}
		$free = @disk_free_space( is_dir( self::$data_dir ) ? self::$data_dir : WP_CONTENT_DIR );
		return array(
			'ok'          => true,
			'mode'        => self::$mode,
			'php'         => PHP_VERSION,
			'wordpress'   => get_bloginfo( 'version' ),
			'problems'    => array_values( array_unique( $problems ) ),
			'paused'      => $state->paused(),
			'kept'        => (object) Fleet_Guard_Keep::listing( self::$data_dir ),
			'free_bytes'  => false === $free ? null : (int) $free,
			'keep_bytes'  => (int) self::setting( 'FLEET_GUARD_KEEP_BYTES', Fleet_Guard_Keep::DEFAULT_BYTES ),
			'plugins'     => (object) $plugins,
			'themes'      => (object) $themes,
			'theme'       => (string) get_option( 'stylesheet' ),
		);
	}

	public static function data_dir() {
		return self::$data_dir;
	}
}

/** The guard's small memory on disk (the data folder): paused plugins, nonces seen, the rate, problems. */
final class Fleet_Guard_State {
	/** @var string */
	private $dir;

	public function __construct( $dir ) {
		$this->dir = $dir;
	}

	public function writable() {
		return '' !== $this->dir && is_dir( $this->dir ) && is_writable( $this->dir );
	}

	/** Read the state, let `$change` alter it, write it back, all under one lock; null when it cannot be written. */
	private function update( $change ) {
		if ( ! $this->writable() ) {
			return null;
		}
		$lock = @fopen( $this->dir . '/state.lock', 'c' );
		if ( false === $lock || ! flock( $lock, LOCK_EX ) ) {
			return null;
		}
		$state  = $this->read();
		$result = $change( $state );
		$ok     = false !== @file_put_contents( $this->dir . '/state.json.tmp', wp_json_encode( $state ) )
			&& @rename( $this->dir . '/state.json.tmp', $this->dir . '/state.json' );
		flock( $lock, LOCK_UN );
		fclose( $lock );
		return $ok ? $result : null;
	}

	private function read() {
		$raw   = @file_get_contents( $this->dir . '/state.json' );
		$state = is_string( $raw ) ? json_decode( $raw, true ) : null;
		return is_array( $state ) ? $state : array();
	}

	/** @return string[] */
	public function paused() {
		$state = $this->read();
		return isset( $state['paused'] ) && is_array( $state['paused'] ) ? array_keys( $state['paused'] ) : array();
	}

	/** @return string[]|null the paused plugins after the change */
	public function pause( array $plugins, $paused ) {
		return $this->update( function ( &$state ) use ( $plugins, $paused ) {
			$now = isset( $state['paused'] ) && is_array( $state['paused'] ) ? $state['paused'] : array();
			foreach ( $plugins as $plugin ) {
				if ( $paused ) {
					$now[ $plugin ] = time();
				} else {
					unset( $now[ $plugin ] );
				}
			}
			$state['paused'] = (object) $now;
			return array_keys( $now );
		} );
	}

	/** A nonce not seen within the window (remembered for twice the skew); false when seen or not recordable. */
	public function first_use( $nonce, $ts, $skew ) {
		return true === $this->update( function ( &$state ) use ( $nonce, $ts, $skew ) {
			$seen = isset( $state['nonces'] ) && is_array( $state['nonces'] ) ? $state['nonces'] : array();
			$now  = time();
			foreach ( $seen as $key => $when ) {
				if ( $when < $now - 2 * $skew ) {
					unset( $seen[ $key ] );
				}
			}
			if ( isset( $seen[ $nonce ] ) || count( $seen ) > 10000 ) {
				return false;
			}
			$seen[ $nonce ]  = max( $now, $ts );
			$state['nonces'] = (object) $seen;
			return true;
		} );
	}

	/** At most `$per_minute` guard requests a minute, signed or not; without a writable folder, no limit is kept. */
	public function within_rate( $per_minute ) {
		$minute = (int) floor( time() / 60 );
		$within = $this->update( function ( &$state ) use ( $minute, $per_minute ) {
			$rate  = isset( $state['rate'] ) && is_array( $state['rate'] ) ? $state['rate'] : array( 0, 0 );
			$count = $rate[0] === $minute ? $rate[1] + 1 : 1;
			$state['rate'] = array( $minute, $count );
			return $count <= $per_minute;
		} );
		return false !== $within;
	}

	/** @return string[] */
	public function problems() {
		$state = $this->read();
		return isset( $state['problems'] ) && is_array( $state['problems'] ) ? array_values( $state['problems'] ) : array();
	}

	/** Remember (or, with null, forget) a problem under its topic, for the status to tell. */
	public function problem( $topic, $text ) {
		$this->update( function ( &$state ) use ( $topic, $text ) {
			$problems = isset( $state['problems'] ) && is_array( $state['problems'] ) ? $state['problems'] : array();
			if ( null === $text ) {
				unset( $problems[ $topic ] );
			} else {
				$problems[ $topic ] = $text;
			}
			$state['problems'] = (object) $problems;
			return true;
		} );
	}
}

/** Versions kept before updates (tar.gz archives with their checksums), and putting one back. */
final class Fleet_Guard_Keep {
	const DEFAULT_BYTES    = 209715200; // 200 MiB for every kept version together
	const DEFAULT_VERSIONS = 3;

	/** @internal `upgrader_pre_install`: keep the installed version's files; never stops the update. */
	public static function before_install( $response, $hook_extra ) {
		if ( is_wp_error( $response ) || ! is_array( $hook_extra ) ) {
			return $response;
		}
		$dir   = Fleet_Guard::data_dir();
		$state = new Fleet_Guard_State( $dir );
		try {
			if ( ! empty( $hook_extra['plugin'] ) && is_string( $hook_extra['plugin'] ) ) {
				$problem = self::keep( $dir, 'plugin', $hook_extra['plugin'] );
			} elseif ( ! empty( $hook_extra['theme'] ) && is_string( $hook_extra['theme'] ) ) {
				$problem = self::keep( $dir, 'theme', $hook_extra['theme'] );
			} else {
				return $response;
			}
		} catch ( Exception $error ) {
			$problem = 'keeping failed: ' . $error->getMessage();
		}
		$state->problem( 'keep', $problem );
		return $response;
	}

	/** Where the item's files are: [path, is a folder]; null when the name is not safe or not there. */
	private static function source( $type, $slug ) {
		if ( ! preg_match( Fleet_Guard::NAME_PATTERN, $slug ) || false !== strpos( $slug, '..' ) ) {
			return null;
		}
		if ( 'theme' === $type ) {
			return false === strpos( $slug, '/' ) ? array( get_theme_root() . '/' . $slug, true ) : null;
		}
		$folder = dirname( $slug );
		return '.' === $folder ? array( WP_PLUGIN_DIR . '/' . $slug, false ) : array( WP_PLUGIN_DIR . '/' . $folder, true );
	}

	private static function version_of( $type, $slug, $path ) {
		$file    = 'theme' === $type ? $path . '/style.css' : WP_PLUGIN_DIR . '/' . $slug;
		$headers = is_readable( $file ) ? get_file_data( $file, array( 'Version' => 'Version' ) ) : array();
		return isset( $headers['Version'] ) ? (string) $headers['Version'] : '';
	}

	/** Keep the installed files of one item; a problem in words, or null. */
	public static function keep( $dir, $type, $slug ) {
		$source = self::source( $type, $slug );
		if ( null === $source || ! file_exists( $source[0] ) ) {
			return null; // a fresh install: nothing to keep
		}
		if ( ! is_dir( $dir ) || ! is_writable( $dir ) ) {
			return "the guard data folder is not writable: $type $slug was not kept";
		}
		if ( ! class_exists( 'PharData' ) ) {
			return "PHP's Phar extension is missing: $type $slug was not kept";
		}
		list( $path, $folder ) = $source;
		$version = self::version_of( $type, $slug, $path );
		$bytes   = $folder ? self::size( $path ) : (int) filesize( $path );
		$cap     = (int) ( defined( 'FLEET_GUARD_KEEP_BYTES' ) ? FLEET_GUARD_KEEP_BYTES : self::DEFAULT_BYTES );
		if ( $bytes > $cap ) {
			return "$type $slug $version ($bytes bytes) is larger than the keep's cap ($cap bytes): not kept";
		}
		$free = @disk_free_space( $dir );
		if ( false !== $free && $free < 2 * $bytes + 16 * 1048576 ) {
			return "the disk is nearly full ($free bytes free): $type $slug $version was not kept";
		}
		$keep = $dir . '/keep';
		if ( ! is_dir( $keep ) && ! @mkdir( $keep, 0700 ) ) {
			return "cannot create $keep: $type $slug $version was not kept";
		}
		$label = preg_replace( '/[^A-Za-z0-9._-]/', '_', strtok( $slug, '/' ) . '-' . $version );
		$base  = $keep . '/' . $type . '-' . $label . '-' . time() . '-' . bin2hex( random_bytes( 4 ) );
		try {
			$tar = new PharData( $base . '.tar' );
			if ( $folder ) {
				$tar->buildFromDirectory( $path );
			} else {
				$tar->addFile( $path, basename( $path ) );
			}
			$tar->compress( Phar::GZ );
			unset( $tar );
		} catch ( Exception $error ) {
			@unlink( $base . '.tar' );
			@unlink( $base . '.tar.gz' );
			return "$type $slug $version was not kept: " . $error->getMessage();
		}
		@unlink( $base . '.tar' );
		$archive = $base . '.tar.gz';
		if ( ! is_file( $archive ) ) {
			return "$type $slug $version was not kept: the archive was not written (disk full?)";
		}
		self::with_manifest( $dir, function ( &$manifest ) use ( $type, $slug, $version, $archive, $bytes, $cap, $dir ) {
			$key   = $type . ':' . $slug;
			$list  = isset( $manifest[ $key ] ) ? $manifest[ $key ] : array();
			$stale = array();
			foreach ( $list as $i => $entry ) {
				if ( $entry['version'] === $version ) {
					$stale[] = $entry;
					unset( $list[ $i ] );
				}
			}
			$list[] = array( 'version' => $version, 'file' => basename( $archive ), 'sha256' => hash_file( 'sha256', $archive ),
				'bytes' => (int) filesize( $archive ), 'files_bytes' => $bytes, 'at' => time() );
			$list   = array_values( $list );
			$limit  = (int) ( defined( 'FLEET_GUARD_KEEP_VERSIONS' ) ? FLEET_GUARD_KEEP_VERSIONS : self::DEFAULT_VERSIONS );
			while ( count( $list ) > $limit ) {
				$stale[] = array_shift( $list );
			}
			$manifest[ $key ] = $list;
			$stale            = array_merge( $stale, self::over_cap( $manifest, $cap ) );
			foreach ( $stale as $entry ) {
				@unlink( $dir . '/keep/' . basename( $entry['file'] ) );
			}
		} );
		return null;
	}

	/** The oldest kept versions dropped until all fit under the cap; returns them. */
	private static function over_cap( array &$manifest, $cap ) {
		$dropped = array();
		while ( true ) {
			$total  = 0;
			$oldest = null;
			foreach ( $manifest as $key => $list ) {
				foreach ( $list as $i => $entry ) {
					$total += (int) $entry['bytes'];
					if ( null === $oldest || $entry['at'] < $manifest[ $oldest[0] ][ $oldest[1] ]['at'] ) {
						$oldest = array( $key, $i );
					}
				}
			}
			if ( $total <= $cap || null === $oldest ) {
				return $dropped;
			}
			$dropped[] = $manifest[ $oldest[0] ][ $oldest[1] ];
			unset( $manifest[ $oldest[0] ][ $oldest[1] ] );
			$manifest[ $oldest[0] ] = array_values( $manifest[ $oldest[0] ] );
			if ( ! $manifest[ $oldest[0] ] ) {
				unset( $manifest[ $oldest[0] ] );
			}
		}
	}

	private static function with_manifest( $dir, $change ) {
		$lock = @fopen( $dir . '/keep.lock', 'c' );
		if ( false === $lock || ! flock( $lock, LOCK_EX ) ) {
			return null;
		}
		$manifest = self::manifest( $dir );
		$result   = $change( $manifest );
		@file_put_contents( $dir . '/keep/manifest.json.tmp', wp_json_encode( (object) $manifest ) );
		@rename( $dir . '/keep/manifest.json.tmp', $dir . '/keep/manifest.json' );
		flock( $lock, LOCK_UN );
		fclose( $lock );
		return $result;
	}

	private static function manifest( $dir ) {
		$raw      = @file_get_contents( $dir . '/keep/manifest.json' );
		$manifest = is_string( $raw ) ? json_decode( $raw, true ) : null;
		return is_array( $manifest ) ? $manifest : array();
	}

	/** @return array<string, array> "type:slug" -> the kept versions, oldest first */
	public static function listing( $dir ) {
		$listing = array();
		foreach ( self::manifest( $dir ) as $key => $list ) {
			foreach ( $list as $entry ) {
				$listing[ $key ][] = array( 'version' => $entry['version'], 'bytes' => (int) $entry['bytes'],
					'at' => (int) $entry['at'] );
			}
		}
		return $listing;
	}

	/** Put a kept version back in place of the installed files (its checksum checked first). */
	public static function restore( $dir, array $envelope ) {
		$type    = isset( $envelope['type'] ) ? $envelope['type'] : '';
		$slug    = isset( $envelope['slug'] ) ? $envelope['slug'] : '';
		$version = isset( $envelope['version'] ) ? $envelope['version'] : '';
		if ( ! in_array( $type, array( 'plugin', 'theme' ), true ) || ! is_string( $slug ) || ! is_string( $version ) ) {
			return array( 'ok' => false, 'error' => 'restore needs type (plugin or theme), slug and version' );
		}
		$source = self::source( $type, $slug );
		$entry  = null;
		foreach ( self::manifest( $dir ) as $key => $list ) {
			foreach ( $key === $type . ':' . $slug ? $list : array() as $candidate ) {
				if ( $candidate['version'] === $version ) {
					$entry = $candidate;
				}
			}
		}
		if ( null === $source || null === $entry ) {
			return array( 'ok' => false, 'error' => "no kept version $version of $type $slug" );
		}
		$archive = $dir . '/keep/' . basename( $entry['file'] );
		if ( ! is_file( $archive ) || ! hash_equals( (string) $entry['sha256'], (string) hash_file( 'sha256', $archive ) ) ) {
			return array( 'ok' => false, 'error' => "the kept version $version of $type $slug is corrupt "
				. '(its checksum differs): not restored' );
		}
		list( $path, $folder ) = $source;
		$parent  = dirname( $path );
		$staging = $parent . '/.fleet-guard-restore-' . bin2hex( random_bytes( 6 ) );
		$aside   = $parent . '/.fleet-guard-replaced-' . bin2hex( random_bytes( 6 ) );
		try {
			$tar = new PharData( $archive );
			$tar->extractTo( $staging, null, true );
			unset( $tar );
		} catch ( Exception $error ) {
			self::remove_tree( $staging );
			return array( 'ok' => false, 'error' => "the kept version $version of $type $slug could not be unpacked: "
				. $error->getMessage() );
		}
		$unpacked = $folder ? $staging : $staging . '/' . basename( $path );
		if ( file_exists( $path ) && ! @rename( $path, $aside ) ) {
			self::remove_tree( $staging );
			return array( 'ok' => false, 'error' => "cannot move the installed $type $slug aside: not restored" );
		}
		if ( ! @rename( $unpacked, $path ) ) {
			if ( file_exists( $aside ) ) {
				@rename( $aside, $path );
			}
			self::remove_tree( $staging );
			return array( 'ok' => false, 'error' => "cannot put $type $slug $version in place: not restored" );
		}
		self::remove_tree( $aside );
		self::remove_tree( $staging );
		if ( function_exists( 'opcache_reset' ) ) {
			@opcache_reset();
		}
		if ( function_exists( 'wp_clean_plugins_cache' ) ) {
			wp_clean_plugins_cache( false );
		}
		return array( 'ok' => true, 'restored' => array( 'type' => $type, 'slug' => $slug, 'version' => $version ),
			'installed' => self::version_of( $type, $slug, $path ) );
	}

	private static function size( $path ) {
		$total = 0;
		$files = new RecursiveIteratorIterator( new RecursiveDirectoryIterator( $path, FilesystemIterator::SKIP_DOTS ) );
		foreach ( $files as $file ) {
			$total += $file->getSize();
		}
		return $total;
	}

	public static function remove_tree( $path ) {
		if ( '' === $path || ! file_exists( $path ) ) {
			return;
		}
		if ( is_file( $path ) || is_link( $path ) ) {
			@unlink( $path );
			return;
		}
		$entries = new RecursiveIteratorIterator( new RecursiveDirectoryIterator( $path, FilesystemIterator::SKIP_DOTS ),
			RecursiveIteratorIterator::CHILD_FIRST );
		foreach ( $entries as $entry ) {
			if ( $entry->isDir() && ! $entry->isLink() ) {
				@rmdir( $entry->getPathname() );
			} else {
				@unlink( $entry->getPathname() );
			}
		}
		@rmdir( $path );
	}
}

/** Activation: the data folder and the must-use loader, and saying so where either cannot be made. */
final class Fleet_Guard_Setup {
	const LOADER = 'fleet-guard-loader.php';

	/** Out of the web's reach: FLEET_GUARD_DATA_DIR, else beside (not under) the WordPress folder when writable,
	 * else a folder under wp-content whose name is derived from the site's secret keys, refusing the web. */
	public static function data_dir() {
		if ( defined( 'FLEET_GUARD_DATA_DIR' ) ) {
			return rtrim( FLEET_GUARD_DATA_DIR, '/' );
		}
		$secret = substr( hash( 'sha256', 'fleet-guard|' . ( defined( 'AUTH_KEY' ) ? AUTH_KEY : '' ) . '|' . ABSPATH ), 0, 16 );
		$beside = dirname( rtrim( ABSPATH, '/' ) );
		if ( '/' !== $beside && is_writable( $beside ) ) {
			return $beside . '/fleet-guard-data-' . $secret;
		}
		return WP_CONTENT_DIR . '/fleet-guard-' . $secret;
	}

	public static function loader_path() {
		return WPMU_PLUGIN_DIR . '/' . self::LOADER;
	}

	/** Make the data folder and place the loader; a problem is said in wp-admin and in the guard's status. */
	public static function activate() {
		$problems = array();
		$dir      = self::data_dir();
		if ( ! is_dir( $dir ) && ! @mkdir( $dir, 0700, true ) ) {
			$problems[] = "the data folder $dir cannot be created";
		} else {
			@file_put_contents( $dir . '/index.php', "<?php // Silence.\n" );
			@file_put_contents( $dir . '/.htaccess', "Require all denied\nDeny from all\n" );
			@file_put_contents( $dir . '/web.config', '<configuration><system.webServer><authorization><deny users="*" />'
				. '</authorization></system.webServer></configuration>' );
			if ( ! is_writable( $dir ) ) {
				$problems[] = "the data folder $dir is not writable";
			}
		}
		$loader = str_replace( array( '%CORE%', '%DATA%' ), array( addslashes( __DIR__ . '/guard.php' ), addslashes( $dir ) ),
			(string) file_get_contents( __DIR__ . '/loader.php' ) );
		$free   = is_dir( WPMU_PLUGIN_DIR ) ? @disk_free_space( WPMU_PLUGIN_DIR ) : @disk_free_space( WP_CONTENT_DIR );
		if ( false !== $free && $free < 1048576 ) {
			$problems[] = "the disk is full ($free bytes free): the must-use loader was not placed";
		} elseif ( ! is_dir( WPMU_PLUGIN_DIR ) && ! @mkdir( WPMU_PLUGIN_DIR, 0755, true ) ) {
			$problems[] = 'the must-use plugins folder ' . WPMU_PLUGIN_DIR . ' cannot be created';
		} elseif ( ! is_writable( WPMU_PLUGIN_DIR ) ) {
			$problems[] = 'the must-use plugins folder ' . WPMU_PLUGIN_DIR . ' is not writable';
		} elseif ( strlen( $loader ) !== @file_put_contents( self::loader_path(), $loader ) ) {
			@unlink( self::loader_path() );
			$problems[] = 'the must-use loader could not be written to ' . WPMU_PLUGIN_DIR . ' (disk full?)';
		}
		if ( $problems ) {
			update_option( 'fleet_guard_problem', implode( '; ', $problems ), false );
		} else {
			delete_option( 'fleet_guard_problem' );
		}
	}

	public static function deactivate() {
		self::remove_loader();
	}

	public static function remove_loader() {
		if ( file_exists( self::loader_path() ) ) {
			@unlink( self::loader_path() );
		}
	}

	/** @internal wp-admin says when the guard cannot stand outside a failing plugin. */
	public static function admin_notice() {
		$problem = get_option( 'fleet_guard_problem' );
		if ( $problem && current_user_can( 'activate_plugins' ) ) {
			printf( '<div class="notice notice-error"><p>%s</p></div>', esc_html( 'Fleet Guard cannot stand outside '
				. 'a failing plugin on this site: ' . $problem . '. Fix it, then deactivate and activate Fleet Guard.' ) );
		}
	}
}
