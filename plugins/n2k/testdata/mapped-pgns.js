// Writes mapped-pgns.log: messages for the PGNs that n2k-signalk maps and the shipped logs
// do not carry (AIS, alerts, configuration, route, manufacturers' PGNs), encoded by
// canboatjs from field values, one whole message a line in canboat's text format. The
// reference test compares devctl n2k decode with canboatjs + n2k-signalk on it. Run from the
// repository root after `make n2k-reference`:
//
//   NODE_PATH=.cache/n2k/ref/node_modules node plugins/n2k/testdata/mapped-pgns.js \
//     > plugins/n2k/testdata/logs/mapped-pgns.log
//
// Each message is decoded back with canboatjs; one that does not come back as the intended
// definition stops the script.
'use strict'
const { pgnToActisenseSerialFormat, FromPgn } = require('@canboat/canboatjs')

const ray = { manufacturerCode: 'Raymarine', industryCode: 'Marine Industry' }
const simrad = { manufacturerCode: 'Simrad', industryCode: 'Marine Industry' }
const lowrance = { manufacturerCode: 'Lowrance', industryCode: 'Marine Industry' }
const fusion = { manufacturerCode: 'Fusion Electronics', industryCode: 'Marine Industry' }

// [pgn, src, fields, the canboat id the message is encoded as, the id canboatjs decodes it
// as where that differs]
const messages = [
  // AIS: class A and B positions, static data, aids to navigation, base station, SAR
  [129038, 40, { messageId: 'Scheduled Class A position report', repeatIndicator: 'Initial', userId: 244660001, longitude: 4.5123456, latitude: 52.1234567, positionAccuracy: 'High', raim: 'not in use', timeStamp: '30', cog: 1.5, sog: 5.2, communicationState: 0, aisTransceiverInformation: 'Channel A VDL reception', heading: 1.6, rateOfTurn: 0.001, navStatus: 'Under way using engine', specialManeuverIndicator: 'Not engaged in special maneuver' }],
  [129038, 40, { messageId: 'Scheduled Class A position report', userId: 244660002, longitude: -4.25, latitude: 48.5, cog: 0.2, sog: 0, heading: 0.3, navStatus: 'Moored' }],
  [129038, 40, { messageId: 'Scheduled Class A position report', userId: 1234567, longitude: 1, latitude: 1, sog: 1 }],
  [129039, 40, { messageId: 'Standard Class B position report', repeatIndicator: 'Initial', userId: 244123456, longitude: 5.1, latitude: 53.2, positionAccuracy: 'Low', raim: 'in use', timeStamp: '12', cog: 3.1, sog: 2.5, communicationState: 0, aisTransceiverInformation: 'Channel B VDL reception', heading: 3.0, unitType: 'CS', integratedDisplay: 'No', dsc: 'Yes', band: 'Entire marine band', canHandleMsg22: 'Yes', aisMode: 'Autonomous', aisCommunicationState: 'ITDMA' }],
  [129040, 40, { messageId: 'Extended Class B position report', userId: 244123457, longitude: 5.2, latitude: 53.3, cog: 1.2, sog: 3.4, trueHeading: 1.25, typeOfShip: 'Sailing', length: 12.5, beam: 4.2, positionReferenceFromStarboard: 3.0, positionReferenceFromBow: 4.0, name: 'SEA BREEZE' }],
  [129041, 40, { messageId: 'ATON report', userId: 992446001, longitude: 4.1, latitude: 52.9, lengthDiameter: 5, beamDiameter: 3, positionReferenceFromStarboardEdge: 1, positionReferenceFromBow: 2, atonType: 'Fixed beacon: cardinal N', offPositionIndicator: 'No', virtualAtonFlag: 'Yes', atonName: 'NOORD 1' }],
  [129041, 40, { messageId: 'ATON report', userId: 992446002, longitude: 4.2, latitude: 52.8, atonType: 'Floating AtoN: port hand mark', offPositionIndicator: 'Yes', virtualAtonFlag: 'No', atonName: 'PORT 2' }],
  [129793, 40, { messageId: 'UTC and date response', userId: 2442000, longitude: 4.3, latitude: 52.7, positionAccuracy: 'High', raim: 'not in use', positionTime: '12:00:00', communicationState: 0, aisTransceiverInformation: 'Channel A VDL reception', positionDate: '2026.11.27', gnssType: 'GPS' }],
  [129794, 40, { messageId: 'Static and voyage related data', userId: 244660001, imoNumber: 9123456, callsign: 'PDAB', name: 'NORTH STAR', typeOfShip: 'Cargo ship', length: 120, beam: 18, positionReferenceFromStarboard: 10, positionReferenceFromBow: 100, etaDate: '2026.12.01', etaTime: '13:45:00', draft: 6.5, destination: 'ROTTERDAM', aisVersionIndicator: 'ITU-R M.1371-3', gnssType: 'GPS', dte: 'Available', aisTransceiverInformation: 'Channel A VDL reception' }],
  [129794, 40, { messageId: 'Static and voyage related data', userId: 244660002, imoNumber: 0, callsign: 'PDAC', name: 'TANKER TWO', typeOfShip: 'Tanker carrying dangerous goods', length: 200, beam: 30, positionReferenceFromStarboard: 20, positionReferenceFromBow: 150, destination: 'ANTWERP' }],
  [129798, 40, { messageId: 'Standard SAR aircraft position report', userId: 111244001, longitude: 4.4, latitude: 52.6, positionAccuracy: 'High', raim: 'not in use', timeStamp: '10', cog: 2.0, sog: 60, communicationState: 0, aisTransceiverInformation: 'Channel A VDL reception', altitude: 300 }],
  [129809, 40, { messageId: 'Static data report', userId: 244123456, name: 'LITTLE WING', aisTransceiverInformation: 'Channel B VDL reception' }],
  [129810, 40, { messageId: 'Static data report', userId: 244123456, typeOfShip: 'Pleasure', vendorId: 'ACME', callsign: 'PB1234', length: 10, beam: 3.5, positionReferenceFromStarboard: 1.5, positionReferenceFromBow: 6, mothershipUserId: 0, aisTransceiverInformation: 'Channel B VDL reception' }],
  [130842, 40, { ...simrad, messageId: 'Msg 24 Part A', repeatIndicator: 'Initial', userId: 244123458, name: 'SIMNET BOAT' }, 'simnetAisClassBStaticDataMsg24PartA'],
  [130842, 40, { ...simrad, messageId: 'Msg 24 Part B', repeatIndicator: 'Initial', userId: 244123458, typeOfShip: 'Sailing', vendorId: 'SIM', callsign: 'PC9999', length: 11, beam: 3.8, positionReferenceFromStarboard: 2, positionReferenceFromBow: 5, mothershipUserId: 0 }, 'simnetAisClassBStaticDataMsg24PartB'],
  // charger and inverter configuration
  [127510, 41, { instance: 1, batteryInstance: 0, chargerEnableDisable: 'On', chargeCurrentLimit: 30, chargingAlgorithm: 'Trickle', chargerMode: 'Standalone mode', estimatedTemperature: 'Warm', equalizeOneTimeEnableDisable: 'Off', overChargeEnableDisable: 'On', equalizeTime: 3600 }],
  [127511, 41, { instance: 2, acInstance: 0, dcInstance: 0, inverterEnableDisable: 'Off', inverterMode: 'Standalone mode', loadSenseEnableDisable: 'On', loadSensePowerThreshold: 50, loadSenseInterval: 2 }],
  // a route: 129284 names the course calculation the route paths use
  [129284, 42, { sid: 1, distanceToWaypoint: 1500, courseBearingReference: 'True', perpendicularCrossed: 'No', arrivalCircleEntered: 'No', calculationType: 'Great Circle', etaTime: '14:00:00', etaDate: '2026.11.27', bearingOriginToDestinationWaypoint: 1.1, bearingPositionToDestinationWaypoint: 1.2, originWaypointNumber: 1, destinationWaypointNumber: 2, destinationLatitude: 52.5, destinationLongitude: 4.6, waypointClosingVelocity: 3.2 }],
  [129285, 42, { startRps: 0, nItems: 3, databaseId: 1, routeId: 7, navigationDirectionInRoute: 'Forward', supplementaryRouteWpDataAvailable: 'Off', routeName: 'HOME', list: [{ wpId: 1, wpName: 'START', wpLatitude: 52.4, wpLongitude: 4.5 }, { wpId: 2, wpName: 'MIDDLE', wpLatitude: 52.5, wpLongitude: 4.6 }, { wpId: 3, wpName: 'END', wpLatitude: 52.6, wpLongitude: 4.7 }] }],
  // alerts: the text first, then the alert (active, then acknowledged)
  [126985, 43, { alertType: 'Warning', alertCategory: 'Navigational', alertSystem: 5, alertSubSystem: 0, alertId: 17, dataSourceNetworkIdName: 1234, dataSourceInstance: 0, dataSourceIndexSource: 0, alertOccurrenceNumber: 1, languageId: 'English (US)', alertTextDescription: 'Shallow water', alertLocationTextDescription: 'Bow' }],
  [126983, 43, { alertType: 'Warning', alertCategory: 'Navigational', alertSystem: 5, alertSubSystem: 0, alertId: 17, dataSourceNetworkIdName: 1234, dataSourceInstance: 0, dataSourceIndexSource: 0, alertOccurrenceNumber: 1, temporarySilenceStatus: 'No', acknowledgeStatus: 'No', escalationStatus: 'No', temporarySilenceSupport: 'Yes', acknowledgeSupport: 'Yes', escalationSupport: 'No', acknowledgeSourceNetworkIdName: 0, triggerCondition: 'Auto', thresholdStatus: 'Threshold Exceeded', alertPriority: 1, alertState: 'Active' }],
  [126983, 43, { alertType: 'Warning', alertCategory: 'Navigational', alertSystem: 5, alertSubSystem: 0, alertId: 17, alertOccurrenceNumber: 1, temporarySilenceStatus: 'No', acknowledgeStatus: 'Yes', alertPriority: 1, alertState: 'Acknowledged' }],
  [126983, 43, { alertType: 'Alarm', alertCategory: 'Technical', alertSystem: 2, alertId: 99, alertState: 'Active' }],
  // Lowrance temperature
  [65285, 44, { ...lowrance, temperatureSource: 'Sea Temperature', actualTemperature: 288.15 }, 'lowranceTemperature'],
  [65285, 44, { ...lowrance, temperatureSource: 'Live Well Temperature', actualTemperature: 290.5 }, 'lowranceTemperature'],
  // Raymarine Seatalk
  [65288, 45, { ...ray, sid: 1, alarmStatus: 'Alarm condition met and not silenced', alarmId: 'Shallow Depth', alarmGroup: 'Instrument', alarmPriority: 1 }, 'seatalkAlarm'],
  [65288, 45, { ...ray, sid: 2, alarmStatus: 'Alarm condition met and silenced', alarmId: 'WP Arrival', alarmGroup: 'Chart Plotter', alarmPriority: 1 }, 'seatalkAlarm'],
  [65288, 45, { ...ray, sid: 3, alarmStatus: 'Alarm condition not met', alarmId: 'Pilot Off Course', alarmGroup: 'Autopilot', alarmPriority: 1 }, 'seatalkAlarm'],
  [65345, 45, { ...ray, windDatum: 5.5, rollingAverageWindAngle: 5.4 }, 'seatalkPilotWindDatum'],
  [65345, 45, { ...ray, windDatum: 0.7, rollingAverageWindAngle: 0.7 }, 'seatalkPilotWindDatum'],
  [65359, 45, { ...ray, sid: 1, headingTrue: 1.1, headingMagnetic: 1.2 }, 'seatalkPilotHeading'],
  [65360, 45, { ...ray, sid: 1, targetHeadingTrue: 2.1, targetHeadingMagnetic: 2.2 }, 'seatalkPilotLockedHeading'],
  [65379, 45, { ...ray, pilotMode: 64, subMode: 0, pilotModeData: 0 }, 'seatalkPilotMode'],
  [65379, 45, { ...ray, pilotMode: 0, subMode: 1, pilotModeData: 0 }, 'seatalkPilotMode'],
  [65379, 45, { ...ray, pilotMode: 128, subMode: 1, pilotModeData: 0 }, 'seatalkPilotMode'],
  [65379, 45, { ...ray, pilotMode: 0, subMode: 0, pilotModeData: 0 }, 'seatalkPilotMode'],
  [126720, 45, { ...ray, proprietaryId: 240, command: 129, seatalk1Command: 132, unknown1: 0, pilotMode: 'Auto', subMode: 0, pilotModeData: 0 }, 'seatalk1PilotMode'],
  [126720, 45, { ...ray, proprietaryId: 240, command: 129, seatalk1Command: 132, unknown1: 0, pilotMode: 'Wind', subMode: 4, pilotModeData: 0 }, 'seatalk1PilotMode'],
  [126720, 45, { ...ray, proprietaryId: 240, command: 129, seatalk1Command: 132, unknown1: 0, pilotMode: 'Standby', subMode: 0, pilotModeData: 0 }, 'seatalk1PilotMode'],
  [126720, 45, { ...ray, proprietaryId: 140, command1: 12, group: 'Helm 1', shared: 1, command: 0, brightness: 80 }, 'seatalk1DisplayBrightness'],
  [126720, 45, { ...ray, proprietaryId: 140, command1: 12, group: 'Cockpit', unknown1: 1, command: 1, color: 'Red/Black' }, 'seatalk1DisplayColor'],
  // Simrad Simnet
  [65305, 46, { ...simrad, model: 'AC', report: 'Mode', mode: ['Heading'] }, 'simnetPilotMode'],
  [65305, 46, { ...simrad, model: 'AC', report: 'Mode', mode: ['Wind'] }, 'simnetPilotMode'],
  [65305, 46, { ...simrad, model: 'AC', report: 'Mode', mode: ['Standby'] }, 'simnetPilotMode'],
  [65341, 46, { ...simrad, mode: 'Heading', angle: 1.3 }, 'simnetAutopilotAngle'],
  [65341, 46, { ...simrad, mode: 'Wind', angle: 0.8 }, 'simnetAutopilotAngle'],
  // canboatjs 3.20.0 decodes a Simnet alarm back as an AP command (the reference maps
  // nothing for it): the line is kept so that the plugin's mapping of it runs, and the
  // check below accepts that decoding.
  [130850, 46, { ...simrad, address: 0, proprietaryId: 1, alarm: 'Low boat speed', messageId: 1, f: 0, g: 0 }, 'simnetAlarm', 'simnetApCommand'],
  // steering, engines, transmission, power and current, which the real logs lack
  [127237, 47, { rudderLimitExceeded: 'No', offHeadingLimitExceeded: 'No', offTrackLimitExceeded: 'No', override: 'No', steeringMode: 'Heading Control Standalone', turnMode: 'Rudder Limit controlled', headingReference: 'Magnetic', commandedRudderDirection: 'No Order', commandedRudderAngle: 0.05, headingToSteerCourse: 1.2, track: 1.1, rudderLimit: 0.5, offHeadingLimit: 0.2, radiusOfTurnOrder: 100, rateOfTurnOrder: 0.01, offTrackLimit: 50, vesselHeading: 1.19 }],
  [127237, 47, { headingReference: 'True', headingToSteerCourse: 2.2 }],
  [127245, 47, { instance: 0, directionOrder: 'No Order', angleOrder: 0.1, position: -0.05 }],
  [127488, 48, { instance: 'Single Engine or Dual Engine Port', speed: 1800.5, boostPressure: 120000, tiltTrim: 20 }],
  [127488, 48, { instance: 'Dual Engine Starboard', speed: 900, tiltTrim: -10 }],
  [127493, 48, { instance: 'Single Engine or Dual Engine Port', transmissionGear: 'Forward', oilPressure: 250000, oilTemperature: 340.5, discreteStatus1: 2 }],
  [127497, 48, { instance: 'Single Engine or Dual Engine Port', tripFuelUsed: 120, fuelRateAverage: 12.5, fuelRateEconomy: 2.5, instantaneousFuelEconomy: 3.1 }],
  [127503, 49, { instance: 0, numberOfLines: 2, list: [{ line: 'Line 1', acceptability: 'Good', voltage: 230, current: 5.5, frequency: 50, breakerSize: 16, realPower: 1200, reactivePower: 100, powerFactor: 0.95 }, { line: 'Line 2', acceptability: 'Bad Level', voltage: 229, current: 1.5, frequency: 50 }] }],
  [127504, 49, { instance: 1, numberOfLines: 1, list: [{ line: 'Line 1', waveform: 'Pure sine', voltage: 230, current: 3, frequency: 50, breakerSize: 10, realPower: 600, reactivePower: 20, powerFactor: 0.98 }] }],
  [127507, 49, { instance: 1, batteryInstance: 0, operatingState: 'Float', chargeMode: 'Standalone mode', enabled: 'On', equalizationPending: 'Off', equalizationTimeRemaining: 0 }],
  [127509, 49, { instance: 1, acInstance: 0, dcInstance: 0, operatingState: 'Invert', inverterEnable: 'On' }],
  [127513, 49, { instance: 0, batteryType: 'AGM', supportsEqualization: 'No', nominalVoltage: '12V', chemistry: 'Li', capacity: 200, temperatureCoefficient: 5, peukertExponent: 1.05, chargeEfficiencyFactor: 95 }],
  [127744, 49, { sid: 0, connectionNumber: 1, acRmsCurrent: 4.5, power: 1000 }],
  [127745, 49, { sid: 0, connectionNumber: 1, acRmsCurrent: 3.5, power: 800 }],
  [127746, 49, { sid: 0, connectionNumber: 1, acRmsCurrent: 2.5, power: 600 }],
  [127750, 49, { sid: 0, connectionNumber: 2, operatingState: 'Float', temperatureState: 'Good', overloadState: 'Warning', lowDcVoltageState: 'Good', rippleState: 'Error' }],
  [127751, 49, { sid: 0, connectionNumber: 3, dcVoltage: 13.2, dcCurrent: -4.5 }],
  [129283, 42, { sid: 1, xteMode: 'Autonomous', navigationTerminated: 'No', xte: 12.5 }],
  [129291, 42, { sid: 1, setReference: 'True', set: 2.5, drift: 0.6 }],
  [130316, 47, { sid: 0, instance: 2, source: 'Inside Temperature', temperature: 294.15, setTemperature: 295 }],
  [130316, 47, { sid: 0, instance: 1, source: 'Exhaust Gas Temperature', temperature: 620.5 }],
  [130577, 42, { dataMode: 'Autonomous', cogReference: 'True', sid: 1, cog: 1.4, sog: 5.5, heading: 1.35, speedThroughWater: 5.2, set: 2.4, drift: 0.4 }],
  // a Fusion stereo: before its first Source message, the track has no source to go under
  [130820, 51, { ...fusion, messageId: 32773, sourceId: 5, index: 1, track: 'Before any source' }, 'fusionTrackName'],
  [130820, 51, { ...fusion, messageId: 32801, name: 'Saloon' }, 'fusionDeviceName'],
  [130820, 51, { ...fusion, messageId: 32800, state: 'On' }, 'fusionPowerState'],
  [130820, 51, { ...fusion, messageId: 32770, sourceId: 5, currentSourceId: 5, sourceType: 'USB', flags: 0, source: 'USB' }, 'fusionSource'],
  [130820, 51, { ...fusion, messageId: 32770, sourceId: 1, currentSourceId: 5, sourceType: 'FM', flags: 0, source: 'FM' }, 'fusionSource'],
  [130820, 51, { ...fusion, messageId: 32772, sourceId: 5, flags: 'Playing', track: 3, trackCount: 12, length: '00:03:45', positionInTrack: '00:01:00' }, 'fusionMedia'],
  [130820, 51, { ...fusion, messageId: 32772, sourceId: 5, flags: 'Paused', track: 4, trackCount: 12, length: '00:04:10', positionInTrack: '00:00:10' }, 'fusionMedia'],
  [130820, 51, { ...fusion, messageId: 32773, sourceId: 5, index: 3, track: 'Harbour Lights' }, 'fusionTrackName'],
  [130820, 51, { ...fusion, messageId: 32774, sourceId: 5, index: 3, artist: 'The Deckhands' }, 'fusionArtistName'],
  [130820, 51, { ...fusion, messageId: 32775, sourceId: 5, index: 3, album: 'Low Tide' }, 'fusionAlbumName'],
  [130820, 51, { ...fusion, messageId: 32777, sourceId: 5, progress: '00:01:30' }, 'fusionTrackPosition'],
  [130820, 51, { ...fusion, messageId: 32779, sourceId: 'FM', scanning: 0, frequency: 101500000, signalStrength: 40, track: 'Radio One' }, 'fusionTuner'],
  [130820, 51, { ...fusion, messageId: 32779, sourceId: 'AM', scanning: 0, frequency: 1080000, signalStrength: 20, track: '' }, 'fusionTuner'],
  [130820, 51, { ...fusion, messageId: 32797, zone1: 12, zone2: 10, zone3: 0, zone4: 24 }, 'fusionVolumes'],
  [130820, 51, { ...fusion, messageId: 32813, number: 1, name: 'Cockpit' }, 'fusionZoneName'],
  [130820, 51, { ...fusion, messageId: 32791, mute: 'Mute On' }, 'fusionMute'],
  [130820, 51, { ...fusion, messageId: 32795, zone: 0, bass: 2, mid: -1, treble: 3 }, 'fusionEq'],
  [130820, 51, { ...fusion, messageId: 32804, sourceId: 5, channelNumber: 20, channel: 'Jazz Channel' }, 'fusionSiriusxmChannel'],
  [130820, 51, { ...fusion, messageId: 32805, sourceId: 5, channel: 20, title: 'Blue Water' }, 'fusionSiriusxmTitle'],
  [130820, 51, { ...fusion, messageId: 32806, sourceId: 5, channel: 20, artist: 'Quartet' }, 'fusionSiriusxmArtist'],
  [130820, 51, { ...fusion, messageId: 32807, sourceId: 5, channel: 20, genre: 'Jazz' }, 'fusionSiriusxmContentInfo']
]

// Maretron's AC and generator PGNs (65005..65030) need the sender's device instance, from
// its address claim.
messages.push([60928, 50, { uniqueNumber: 12345, manufacturerCode: 'Maretron', deviceInstanceLower: 2, deviceInstanceUpper: 0, deviceFunction: 140, deviceClass: 'Electrical Generation', systemInstance: 0, industryGroup: 'Marine Industry', arbitraryAddressCapable: 'Yes' }])
for (const base of [65005, 65018]) {
  messages.push([base, 50, { totalEnergyExport: 1000, totalEnergyImport: 2000 }])
  for (let i = 0; i < 4; i++) {
    const p = base + 1 + 3 * i
    messages.push([p, 50, { reactivePower: 100 + i, powerFactor: 0.5, powerFactorLagging: 'Leading' }])
    messages.push([p + 1, 50, { realPower: 1000 + i, apparentPower: 1200 + i }])
    messages.push([p + 2, 50, { lineLineAcRmsVoltage: 400 + i, lineNeutralAcRmsVoltage: 230 + i, acFrequency: 50, acRmsCurrent: 10 + i }])
  }
}

const back = new FromPgn({})
let decoded
back.on('pgn', (p) => { decoded = p })
back.on('warning', () => {})
back.on('error', () => {})

const start = Date.parse('2026-11-27T12:00:00.000Z')
messages.forEach(([pgn, src, fields, id, refID], i) => {
  const msg = { pgn, src, dst: 255, prio: 3, fields }
  if (id) msg.id = id
  const time = new Date(start + i * 100).toISOString()
  const line = pgnToActisenseSerialFormat(msg).replace(/^[^,]*/, time)
  decoded = undefined
  back.parseString(line)
  if (!decoded || (id && decoded.id !== (refID || id))) {
    throw new Error(`message ${i} (${pgn}) decodes as ${decoded && decoded.id}, want ${id}: ${line}`)
  }
  process.stdout.write(line + '\n')
})
